# Shared by bench/torch_ddp.sh and bench/torch_horovod.sh (sourced): their options and medians.
#
# parse_torch_bench_options "$@" sets reps (-R, default 3), np (-np, default 2) and the array
# extra (what follows --, passed to the Python benchmark).
parse_torch_bench_options() {
  reps=3
  np=2
  extra=()
  while (($#)); do
    case "$1" in
      -R) reps="$2"; shift 2 ;;
      -np) np="$2"; shift 2 ;;
      --) shift; extra=("$@"); break ;;
      *) echo "$(basename "$0"): unknown option $1" >&2; exit 2 ;;
    esac
  done
}

# median "v1 v2 ...": the median of the numbers.
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{v[NR]=$1} END {
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
