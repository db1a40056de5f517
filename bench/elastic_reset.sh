#!/usr/bin/env bash
# How long an elastic job takes to get over a lost host and to take a returning one back, on the
# network-namespace test bed (three simulated hosts, one worker each; needs root, see
# tests/netns/README.md). One train_fashion_mnist --elastic job runs while, K times, the third
# host's worker is killed with SIGKILL, the host leaves the discovery script's list (hooprun
# readmits a blacklisted host only after it was gone from the list), and comes back. The table
# gives, per repeat and as medians:
#   kill -> shrink      kill to hooprun's "round N: 2 workers" line
#   kill -> resumed     kill to rank 0's "elastic: training again in round N" (the state is
#                       restored and broadcast, the next step starts)
#   kill -> epoch       kill to rank 0's next "epoch" line (it prints one per epoch, so this
#                       depends on where in the epoch the kill lands)
#   relist -> grow      host listed again to hooprun's "round N+1: 3 workers" line (hooprun runs
#                       the discovery script once a second: up to 1 s of this is the poll)
#   relist -> resumed   host listed again to rank 0's "training again in round N+1" (includes
#                       the new worker's start)
#
#   bench/elastic_reset.sh [--repeats K] [--model mlp|lenet5] [--log FILE]
#       [--hooprun PATH] [--train PATH]
# K defaults to 5; hooprun and train_fashion_mnist default to build/bin's; --log keeps the
# job's output (each line prefixed with its arrival time in epoch seconds). The script builds
# the bed itself (tests/netns/testbed.sh --hosts 3) and runs itself inside it. A repeat that
# fails (the job hangs or ends) ends the run, after the table of the repeats before it.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
repeats=5
model=mlp
log=""
hooprun="$repo/build/bin/hooprun"
train="$repo/build/bin/train_fashion_mnist"
# shellcheck source=SCRIPTDIR/../tests/netns/elastic_lib.sh
source "$repo/tests/netns/elastic_lib.sh"
args=("$@")
while (($#)); do
  case "$1" in
    --repeats) repeats=${2:?}; shift 2 ;;
    --model) model=${2:?}; shift 2 ;;
    --log) log=${2:?}; shift 2 ;;
    --hooprun) hooprun=${2:?}; shift 2 ;;
    --train) train=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "elastic_reset.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "elastic_reset.sh: --repeats '$repeats': expected a count" >&2; exit 2; }
for bin in "$hooprun" "$train"; do
  [[ -x $bin ]] || { echo "elastic_reset.sh: $bin is not built" >&2; exit 2; }
done

# Outside a bed: build one and come back inside it. A repeat takes about 8 s.
if [[ -z ${TESTBED_NS:-} ]]; then
  exec "$repo/tests/netns/testbed.sh" --hosts 3 --timeout $((120 + 30 * repeats)) -- "$0" "${args[@]}"
fi
read -r -a hosts <<<"$TESTBED_NS"
((${#hosts[@]} == 3)) || { echo "elastic_reset.sh: needs a bed of 3 hosts" >&2; exit 2; }

readonly kWait=30  # bound on every wait, in seconds
work=$(mktemp -d)
out=$work/job.out
cleanup() {
  stop_job "$out"
  [[ -n $log && -e $out ]] && cp "$out" "$log"
  rm -rf "$work"
}
trap cleanup EXIT

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
  printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# The table of the repeats measured so far.
print_table() {
  local rows=${#shrink[@]} i fmt='| %-7s | %13s | %14s | %13s | %14s | %17s |\n'
  ((rows > 0)) || return 0
  echo "elastic reset on the netns bed: $model, 3 hosts x 1 worker, $rows of $repeats repeats (seconds)"
  # shellcheck disable=SC2059  # the format is ours
  printf "$fmt" repeat "kill->shrink" "kill->resumed" "kill->epoch" "relist->grow" "relist->resumed"
  # shellcheck disable=SC2059
  printf "$fmt" ------- ------------- -------------- ------------- -------------- -----------------
  for ((i = 0; i < rows; i++)); do
    # shellcheck disable=SC2059
    printf "$fmt" $((i + 1)) "${shrink[i]}" "${resumed[i]}" "${epoch[i]}" "${grow[i]}" "${regrown[i]}"
  done
  # shellcheck disable=SC2059
  printf "$fmt" median "$(median "${shrink[@]}")" "$(median "${resumed[@]}")" \
    "$(median "${epoch[@]}")" "$(median "${grow[@]}")" "$(median "${regrown[@]}")"
}
declare -a shrink=() resumed=() epoch=() grow=() regrown=()

# Shows the job's last lines and what was measured before the failure.
fail() {
  echo "elastic_reset.sh: $*" >&2
  [[ -e $out ]] && tail -n 60 "$out" >&2
  print_table
  exit 1
}

make_discover_script

# More epochs than the repeats need: the job is ended with SIGTERM once they are done.
list_hosts "${hosts[@]}"
start_job "$out" "$train" --model "$model" --epochs $((4 + 3 * repeats)) --elastic --progress off

hit=$(wait_line "$out" '\[0\] epoch 1/' "$kWait") || fail "training did not reach the end of epoch 1"
for ((r = 1; r <= repeats; r++)); do
  # Land the kill anywhere in an epoch, not always right after its line.
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.5 + (r % 200) / 100 }')"
  victim=$(worker_in "${hosts[2]}")
  [[ $(wc -w <<<"$victim") == 1 ]] || fail "repeat $r: expected one worker in ${hosts[2]}, found '$victim'"
  mark=$(wc -l <"$out")
  t_kill=$(now)
  kill -KILL "$victim"
  hit=$(wait_line "$out" 'hooprun: elastic: round [0-9]+: 2 workers' "$kWait" "$mark") ||
    fail "repeat $r: no shrink"
  shrink_line=${hit%%:*}
  t_shrink=${hit#*:}
  list_hosts "${hosts[0]}" "${hosts[1]}"
  n=$(awk -v l="$shrink_line" 'NR == l { sub(/.*round /, ""); sub(/:.*/, ""); print }' "$out")
  hit=$(wait_line "$out" "\\[0\\] .*elastic: training again in round $n " "$kWait" "$mark") ||
    fail "repeat $r: rank 0 did not train again in round $n"
  t_resumed=${hit#*:}
  sleep 2.5  # two runs of the discovery script see the host gone
  t_relist=$(now)
  list_hosts "${hosts[@]}"
  hit=$(wait_line "$out" "hooprun: elastic: round $((n + 1)): 3 workers" "$kWait" "$shrink_line") ||
    fail "repeat $r: no grow after the host was listed again"
  t_grow=${hit#*:}
  hit=$(wait_line "$out" "\\[0\\] .*elastic: training again in round $((n + 1)) " "$kWait" "$shrink_line") ||
    fail "repeat $r: rank 0 did not train again in round $((n + 1))"
  t_regrown=${hit#*:}
  hit=$(wait_line "$out" '\[0\] epoch [0-9]+/' "$kWait" "$mark") || fail "repeat $r: no epoch line after the kill"
  shrink+=("$(elapsed "$t_kill" "$t_shrink")")
  resumed+=("$(elapsed "$t_kill" "$t_resumed")")
  epoch+=("$(elapsed "$t_kill" "${hit#*:}")")
  grow+=("$(elapsed "$t_relist" "$t_grow")")
  regrown+=("$(elapsed "$t_relist" "$t_regrown")")
done

# The measurements are done: end the job (hooprun passes SIGTERM on to the workers).
stop_job "$out"

print_table
