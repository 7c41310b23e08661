#!/usr/bin/env bash
# Interleaved wall-time runs of one or more tessera binaries on one benchmark trace: each
# round runs every binary once, in turn, so a drift in the machine's speed (shared VMs)
# falls on all of them alike; per binary it prints the rate's spread in M simulated warp
# instructions per second (min, 10th percentile, median, 90th percentile, max) and the
# runs below the 2 M/s goal of the timing-model benchmarks (docs/benchmarks.md).
#
#   bash scripts/bench-interleave.sh ROUNDS CONFIG TRACE BINARY...
#
# e.g. bash scripts/bench-interleave.sh 20 titanv triad.tst old/tessera new/tessera
# (triad.tst from `tessera trace gen stream -p kernels=triad -p n=4194304 -o triad.tst`).
set -euo pipefail
rounds=$1; cfg=$2; trace=$(realpath "$3"); shift 3
configs="$(cd "$(dirname "$0")/.." && pwd)/configs"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for _ in $(seq "$rounds"); do
  i=0
  for bin in "$@"; do
    # The rate from the `simulated in ... s on 1 thread(s): R M warp instructions/s` line.
    "$bin" run --config "$configs/$cfg.yaml" --trace "$trace" 2>&1 >/dev/null |
      sed -n 's/.*simulated in .*: \([0-9.]*\) M warp instructions\/s.*/\1/p' >> "$dir/$i"
    i=$((i + 1))
  done
done
i=0
for bin in "$@"; do
  python3 - "$bin" "$dir/$i" <<'P'
import statistics as s, sys
r = sorted(float(x) for x in open(sys.argv[2]))
if not r:
    sys.exit(f"{sys.argv[1]}: no rate read (did the run fail?)")
q = lambda p: r[min(len(r) - 1, int(p * len(r)))]
print(f"{sys.argv[1]}: {len(r)} runs, M warp insts/s: min {r[0]:.2f}, p10 {q(0.1):.2f}, "
      f"median {s.median(r):.2f}, p90 {q(0.9):.2f}, max {r[-1]:.2f}; "
      f"below 2.0: {sum(x < 2.0 for x in r)}")
P
  i=$((i + 1))
done
