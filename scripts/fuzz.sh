#!/usr/bin/env bash
# A bounded fuzz pass (issue 21): each cargo-fuzz target of fuzz/ (tst, accelsim, config,
# run) for SECONDS_PER_TARGET seconds (default 60), one after the other, starting from the
# seed inputs the targets write (the seed trace, tests/data's Accel-Sim fixtures, configs/)
# and whatever fuzz/corpus/<target>/ already holds. Prints the executions of each target;
# exits non-zero when a target crashed, hung or ran out of memory (the input is under
# fuzz/artifacts/<target>/: save it under tests/data/fuzz/<target>/, tests/fuzz_props.rs
# replays it).
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET]
#
# cargo-fuzz needs nightly features: on a stable toolchain they are unlocked with
# RUSTC_BOOTSTRAP=1. Without cargo-fuzz (`cargo install cargo-fuzz`) the pass is skipped
# with a note (the same harnesses run on stable in tests/fuzz_props.rs). FUZZ_TARGETS
# picks targets (default: all four); FUZZ_JOBS runs that many libFuzzer workers a target
# (default 1). TESSERA_FUZZ_KNOWN passes over findings already saved (`|`-separated parts
# of their messages, see fuzz/src/harness.rs) so that a pass looks for new ones;
# TESSERA_FUZZ_STRICT_SEMANTIC=1 makes the run target refuse what `verify` refuses for its
# semantic rules too.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
targets="${FUZZ_TARGETS:-tst accelsim config run}"
jobs="${FUZZ_JOBS:-1}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "scripts/fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz): skipped;" \
        "the same targets run on stable in tests/fuzz_props.rs" >&2
    exit 0
fi
if ! rustc --version | grep -q nightly; then
    export RUSTC_BOOTSTRAP=1
fi

cd fuzz
cargo fuzz build
failed=0
summary=""
for t in $targets; do
    mkdir -p "corpus/$t" "artifacts/$t"
    log="artifacts/$t/fuzz.log"
    start=$(date +%s)
    set +e
    par=()
    if [ "$jobs" -gt 1 ]; then
        par=(-jobs="$jobs" -workers="$jobs")
    fi
    rm -f fuzz-*.log
    TESSERA_FUZZ_SEEDS="corpus/$t" cargo fuzz run "$t" "corpus/$t" -- \
        -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
        -print_final_stats=1 "${par[@]}" </dev/null >"$log" 2>&1
    rc=$?
    set -e
    # Parallel workers log to fuzz-<n>.log.
    cat fuzz-*.log >>"$log" 2>/dev/null || true
    rm -f fuzz-*.log
    took=$(($(date +%s) - start))
    # stat::number_of_executed_units (one per worker), else the last status line's #N.
    execs=$(awk '/stat::number_of_executed_units:/ {s += $2; n++} END {if (n) print s}' "$log")
    if [ -z "$execs" ]; then
        execs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
    fi
    line="$t: ${execs:-0} executions in ${took} s"
    if [ "$rc" -ne 0 ]; then
        failed=1
        line="$line: FAILED (exit $rc; log fuzz/$log; inputs: $(ls "artifacts/$t" | grep -v fuzz.log | tr '\n' ' '))"
        grep -E "panicked at|ERROR: libFuzzer|SUMMARY" "$log" | head -n 5 >&2 || true
    fi
    echo "$line"
    summary="$summary$line"$'\n'
done
echo
echo "fuzz pass, ${secs} s a target:"
printf '%s' "$summary"
exit "$failed"
