#!/usr/bin/env bash
# hoop.jax and hoop.tensorflow beside hoop.torch: bench/jax_bench.py and bench/tf_bench.py (the
# frameworks environment's Python, scripts/install-frameworks) and
# bench/torch_horovod_bench.py --impl hoop (Debian's python3-torch), R runs of each,
# interleaved, all under hooprun. Prints each run's numbers, then per case the medians and
# jax/torch and tf/torch (a time ratio above 1: slower than hoop.torch; for samples/s, a ratio
# below 1 is slower).
#
#   bench/frameworks.sh [-R 3] [-np 2] [-- extra flags for both scripts]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
source "$here/torch_common.sh"
parse_torch_bench_options "$@"
frameworks_python="$root/.frameworks/venv/bin/python"
[[ -x $frameworks_python ]] ||
  { echo "frameworks.sh: no $frameworks_python (run scripts/install-frameworks)" >&2; exit 2; }
export PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}"
cases=(lone_us lone_jit_us step_us step_ops_us step_graph_us step_eager_us large_us samples/s)
declare -A results=()
run() {  # run jax|tf|torch: prints "case value" lines of rank 0
  if [[ $1 == jax || $1 == tf ]]; then
    "$root/build/bin/hooprun" -np "$np" "$frameworks_python" "$here/$1_bench.py" "${extra[@]}"
  else
    "$root/build/bin/hooprun" -np "$np" /usr/bin/python3 "$here/torch_horovod_bench.py" \
      --impl hoop "${extra[@]}"
  fi | sed -n 's/^\[0\] *//p'
}
interleave_runs torch jax tf

med() {  # med IMPL CASE: the median, or - where the implementation has no such case
  if [[ -z ${results[$1,$2]// /} ]]; then echo "-"; else median "${results[$1,$2]}"; fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-"}'; }
echo "| case | hoop.torch | hoop.jax | hoop.tensorflow | jax / torch | tf / torch |"
echo "|---|---:|---:|---:|---:|---:|"
for c in "${cases[@]}"; do
  # Cases an implementation lacks (hoop.torch has no jitted call, no graph) are "-".
  t="$(med torch "$c")" j="$(med jax "$c")" f="$(med tf "$c")"
  echo "| $c | $t | $j | $f | $(ratio "$j" "$t") | $(ratio "$f" "$t") |"
done
