#!/usr/bin/env bash
# A profile-guided, link-time-optimized release build of the `tessera` binary (the one the
# timing-model benchmarks in docs/benchmarks.md quote): fewer host instructions than
# `cargo build --release`, with the same results (the stats JSON is byte-identical).
#
#   bash scripts/build-pgo.sh            # -> target/pgo/release/tessera
#
# It builds an instrumented binary, runs it on a training set, merges the profile with the
# toolchain's llvm-profdata (`rustup component add llvm-tools`, done here when missing) and
# builds again with the profile. The training set is the built-in workloads at sizes other
# than the benchmarks' (so the benchmarks are not what the profile was trained on), on
# several presets, scheduler policies and partitionings, so that every hot path is seen.
# Two release builds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work="$root/target/pgo-work"
rm -rf "$work"
mkdir -p "$work/raw" "$work/traces"

host=$(rustc -vV | sed -n 's/^host: //p')
sysroot=$(rustc --print sysroot)
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  rustup component add llvm-tools
fi
if [ ! -x "$profdata" ]; then
  echo "build-pgo.sh: no llvm-profdata at $profdata (rustup component add llvm-tools)" >&2
  exit 1
fi

# Whole-program optimization too (one codegen unit, fat LTO): slower to build, so only here,
# not in the release profile every test build uses.
export CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1

echo "build-pgo.sh: 1/3 instrumented build" >&2
RUSTFLAGS="-Cprofile-generate=$work/raw" CARGO_TARGET_DIR="$root/target/pgo-gen" \
  cargo build --release --bin tessera
gen="$root/target/pgo-gen/release/tessera"

echo "build-pgo.sh: 2/3 training runs" >&2
t="$work/traces"
"$gen" trace gen vectoradd -p n=200704 -o "$t/va.tst"
"$gen" trace gen gemm -p m=128 -p n=128 -p k=128 -o "$t/gemm.tst"
"$gen" trace gen stream -p kernels=triad -p n=524288 -o "$t/triad.tst"
"$gen" trace gen histogram -p n=262144 -p ctas=64 -o "$t/hist.tst"
"$gen" trace gen stencil2d -p nx=512 -p ny=512 -p iters=2 -o "$t/stencil.tst"
"$gen" trace gen reduce -p n=262144 -o "$t/reduce.tst"
run() { "$gen" run --config "configs/$1.yaml" --trace "$t/$2" "${@:3}" >/dev/null; }
run rtx3070 va.tst
run a100 va.tst
run titanv gemm.tst
run titanv gemm.tst --set partitioning.mode=sm_cluster --set partitioning.sm_clusters=4
run gtx480 gemm.tst --set core.scheduler=two_level
run titanv triad.tst
run a100 hist.tst
run a100 stencil.tst
run a100-4chiplet stencil.tst
run rtx3070 reduce.tst --set core.scheduler=lrr
"$profdata" merge -o "$work/merged.profdata" "$work/raw"

echo "build-pgo.sh: 3/3 optimized build" >&2
RUSTFLAGS="-Cprofile-use=$work/merged.profdata" CARGO_TARGET_DIR="$root/target/pgo" \
  cargo build --release --bin tessera
echo "build-pgo.sh: built $root/target/pgo/release/tessera" >&2
