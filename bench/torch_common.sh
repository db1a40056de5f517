# Shared by bench/torch_ddp.sh and bench/torch_horovod.sh (sourced): their options and medians.
#
# parse_torch_bench_options "$@" sets reps (-R, default 3), np (-np, default 2), modes (-m,
# the modes to compare, space-separated; default $default_modes, set by the caller) and the
# array extra (what follows --, passed to the Python benchmark).
parse_torch_bench_options() {
  reps=3
  np=2
  modes=${default_modes:-}
  extra=()
  while (($#)); do
    case "$1" in
      -R) reps="$2"; shift 2 ;;
      -np) np="$2"; shift 2 ;;
      -m) modes="$2"; shift 2 ;;
      --) shift; extra=("$@"); break ;;
      *) echo "$(basename "$0"): unknown option $1" >&2; exit 2 ;;
    esac
  done
}

# median "v1 v2 ...": the median of the numbers.
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{v[NR]=$1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# interleave_runs IMPL...: $reps rounds, each calling `run IMPL` (the caller's function, which
# prints "case value" lines) for every IMPL in turn, so that drifting machine load hits all
# alike; prints each run's numbers and appends each value to results[IMPL,case] (the caller's
# associative array, for the cases in its array `cases`).
interleave_runs() {
  local i impl out c
  for ((i = 1; i <= reps; i++)); do
    for impl in "$@"; do
      out="$(run "$impl")"
      echo "run $i $impl: $(tr '\n' ' ' <<<"$out")"
      for c in "${cases[@]}"; do
        results[$impl,$c]+="$(awk -v c="$c" '$1 == c {print $2}' <<<"$out") "
      done
    done
  done
}
