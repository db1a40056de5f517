#!/usr/bin/env bash
# hoop.torch against torch DDP (gloo) on the model of examples/torch_fashion_mnist.py:
# R runs of each mode, interleaved (hoop, ddp, hoop, ddp, ...) so that drifting machine load
# hits both alike; prints each run, the median samples/s of each mode and hoop/ddp.
#
#   bench/torch_ddp.sh [-R 3] [-np 2] [-- extra torch_ddp_bench.py flags, e.g. --steps 200]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
python=/usr/bin/python3
source "$here/torch_common.sh"
parse_torch_bench_options "$@"

export PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}"
declare -A results=([hoop]="" [ddp]="")
for ((i = 1; i <= reps; i++)); do
  for mode in hoop ddp; do
    # A fresh port per ddp run: the previous run's socket may linger in TIME_WAIT.
    port=$((29500 + (RANDOM % 2000)))
    line="$("$root/build/bin/hooprun" -np "$np" "$python" "$here/torch_ddp_bench.py" \
      --mode "$mode" --port "$port" "${extra[@]}" | grep 'samples/s')"
    value="${line##* }"
    echo "run $i $mode: $value samples/s"
    results[$mode]+="$value "
  done
done

hoop_median="$(median "${results[hoop]}")"
ddp_median="$(median "${results[ddp]}")"
echo "median hoop: $hoop_median samples/s"
echo "median ddp:  $ddp_median samples/s"
awk -v h="$hoop_median" -v d="$ddp_median" 'BEGIN { printf "ratio hoop/ddp: %.3f\n", h / d }'
