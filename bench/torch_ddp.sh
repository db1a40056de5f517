#!/usr/bin/env bash
# Training throughput of hoop.torch, DDP over gloo and DDP over backend "hoop" on a model of
# examples/torch_fashion_mnist.py: R runs of each mode, interleaved (hoop, ddp, hoop, ddp, ...)
# so that drifting machine load hits all alike; prints each run, the median samples/s of each
# mode and each mode's ratio to the last one.
#
#   bench/torch_ddp.sh [-R 3] [-np 2] [-m "hoop ddp"] [-- extra torch_ddp_bench.py flags]
#   bench/torch_ddp.sh -R 5 -m "ddp-hoop ddp" -- --model wide-mlp --steps 40
# Modes: hoop (hoop.torch's DistributedOptimizer), ddp (DDP over gloo), ddp-hoop (DDP over
# backend "hoop"), ddp-none (DDP exchanging nothing: the step without communication).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
python=/usr/bin/python3
default_modes="hoop ddp"
source "$here/torch_common.sh"
parse_torch_bench_options "$@"
read -r -a mode_list <<<"$modes"

export PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}"
declare -A results=()
for ((i = 1; i <= reps; i++)); do
  for mode in "${mode_list[@]}"; do
    # A fresh port per ddp run: the previous run's socket may linger in TIME_WAIT.
    port=$((29500 + (RANDOM % 2000)))
    line="$("$root/build/bin/hooprun" -np "$np" "$python" "$here/torch_ddp_bench.py" \
      --mode "$mode" --port "$port" "${extra[@]}" | grep 'samples/s')"
    value="${line##* }"
    echo "run $i $mode: $value samples/s"
    results[$mode]+="$value "
  done
done

last=${mode_list[-1]}
last_median="$(median "${results[$last]}")"
for mode in "${mode_list[@]}"; do
  m="$(median "${results[$mode]}")"
  echo "median $mode: $m samples/s"
  [[ $mode == "$last" ]] ||
    awk -v a="$m" -v b="$last_median" -v n="$mode/$last" 'BEGIN { printf "ratio %s: %.3f\n", n, a / b }'
done
