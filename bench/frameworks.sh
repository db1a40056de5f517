#!/usr/bin/env bash
# hoop.jax beside hoop.torch: bench/jax_bench.py (the frameworks environment's Python,
# scripts/install-frameworks) and bench/torch_horovod_bench.py --impl hoop (Debian's
# python3-torch), R runs of each, interleaved, both under hooprun. Prints each run's numbers,
# then per case the medians and jax/torch (a time ratio above 1: hoop.jax is slower).
#
#   bench/frameworks.sh [-R 3] [-np 2] [-- extra flags for both scripts]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
source "$here/torch_common.sh"
parse_torch_bench_options "$@"
jax_python="$root/.frameworks/venv/bin/python"
[[ -x $jax_python ]] || { echo "frameworks.sh: no $jax_python (run scripts/install-frameworks)" >&2; exit 2; }
export PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}"
cases=(lone_us lone_jit_us step_us large_us samples/s)
declare -A results=()
run() {  # run jax|torch: prints "case value" lines of rank 0
  if [[ $1 == jax ]]; then
    "$root/build/bin/hooprun" -np "$np" "$jax_python" "$here/jax_bench.py" "${extra[@]}"
  else
    "$root/build/bin/hooprun" -np "$np" /usr/bin/python3 "$here/torch_horovod_bench.py" \
      --impl hoop "${extra[@]}"
  fi | sed -n 's/^\[0\] *//p'
}
interleave_runs torch jax

echo "| case | hoop.torch | hoop.jax | jax / torch |"
echo "|---|---:|---:|---:|"
for c in "${cases[@]}"; do
  # hoop.torch has no jitted call: its lone_jit_us is empty.
  t="-"
  [[ -z ${results[torch,$c]// /} ]] || t="$(median "${results[torch,$c]}")"
  j="$(median "${results[jax,$c]}")"
  r="$(awk -v a="$j" -v b="$t" 'BEGIN {if (b + 0 > 0) printf "%.2f", a / b; else print "-"}')"
  echo "| $c | $t | $j | $r |"
done
