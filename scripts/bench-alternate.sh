#!/usr/bin/env bash
# Alternating wall-time comparison of two tessera binaries on the timing-model benchmarks
# (docs/development-log.md, "The timing model"): each round runs OLD then NEW on each case; per
# case it prints the medians, the best runs, the median of the per-round ratios OLD/NEW and
# NEW's rates. Alternating matters on machines whose speed drifts (shared VMs).
#
#   bash scripts/bench-alternate.sh OLD_BINARY NEW_BINARY ROUNDS TRACE_DIR
#
# TRACE_DIR holds va.tst, triad.tst and gemm256.tst, made with
#   tessera trace gen vectoradd -p n=1605632 -o va.tst
#   tessera trace gen stream -p kernels=triad -p n=4194304 -o triad.tst
#   tessera trace gen gemm -p m=256 -p n=256 -p k=256 -o gemm256.tst
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2"); rounds=$3; dir=$(realpath "$4")
configs="$(cd "$(dirname "$0")/.." && pwd)/configs"
secs() { "$@" 2>&1 >/dev/null | sed -n 's/.*simulated in \([0-9.]*\) s.*/\1/p'; }
while read -r cfg trace insts extra; do
  pairs=$(mktemp)
  for _ in $(seq "$rounds"); do
    # shellcheck disable=SC2086
    a=$(secs "$old" run --config "$configs/$cfg.yaml" --trace "$dir/$trace" $extra)
    # shellcheck disable=SC2086
    b=$(secs "$new" run --config "$configs/$cfg.yaml" --trace "$dir/$trace" $extra)
    echo "$a $b" >> "$pairs"
  done
  python3 - "$cfg $trace $extra" "$insts" "$pairs" <<'P'
import statistics as s, sys
name, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
p = [tuple(map(float, l.split())) for l in open(path)]
a = [x for x, _ in p]; b = [y for _, y in p]; r = sorted(x / y for x, y in p)
print(f"{name.strip()}: old median {s.median(a):.3f} s (best {min(a):.3f}), new median "
      f"{s.median(b):.3f} s (best {min(b):.3f}), median ratio {s.median(r):.2f} "
      f"({r[0]:.2f} to {r[-1]:.2f}); new: {n / s.median(b) / 1e6:.2f} M warp insts/s "
      f"median, {n / min(b) / 1e6:.2f} best")
P
  rm -f "$pairs"
done <<'CASES'
rtx3070 va.tst 702464
titanv triad.tst 1835008
titanv gemm256.tst 4661248
titanv gemm256.tst 4661248 --set partitioning.mode=sm_cluster --set partitioning.sm_clusters=4
CASES
