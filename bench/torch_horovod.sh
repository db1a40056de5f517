#!/usr/bin/env bash
# hoop.torch against Horovod 0.28.1 (horovod.torch over gloo, built by bench/horovod_install.sh
# into a private prefix) on bench/torch_horovod_bench.py: R runs of each, interleaved (hoop,
# horovod, hoop, ...), so that drifting machine load hits both alike. Prints each run's four
# numbers, then per case the medians and horovod/hoop (above 1: hoop is ahead).
#
#   bench/torch_horovod.sh [-R 3] [-np 2] [-- extra torch_horovod_bench.py flags]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
prefix="$root/build-bench/horovod"
python=/usr/bin/python3
source "$here/torch_common.sh"
parse_torch_bench_options "$@"

"$here/horovod_install.sh" "$prefix" >/dev/null
# The example module the benchmark borrows its model from imports hoop.torch: both runs see it.
export PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}"
cases=(lone_us step_us large_us samples/s)
declare -A results=()
run() {  # run IMPL: prints "case value" lines of rank 0
  if [[ $1 == hoop ]]; then
    "$root/build/bin/hooprun" -np "$np" "$python" "$here/torch_horovod_bench.py" --impl hoop \
      "${extra[@]}"
  else
    PYTHONPATH="$prefix:$PYTHONPATH" "$python" "$prefix/bin/horovodrun" -np "$np" \
      -H "localhost:$np" --gloo "$python" "$here/torch_horovod_bench.py" --impl horovod \
      "${extra[@]}"
  fi | sed -n 's/^\[0\]\(<stdout>:\)\{0,1\} *//p'
}
interleave_runs hoop horovod

echo "| case | hoop.torch | horovod.torch | hoop ahead by |"
echo "|---|---:|---:|---:|"
for c in "${cases[@]}"; do
  a="$(median "${results[hoop,$c]}")"
  b="$(median "${results[horovod,$c]}")"
  # Times: horovod / hoop; throughput: hoop / horovod.
  if [[ $c == samples/s ]]; then r="$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2fx", a / b}')"
  else r="$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2fx", b / a}')"; fi
  echo "| $c | $a | $b | $r |"
done
