# shellcheck shell=bash disable=SC2154  # work, hooprun and train are the caller's (see below)
# What tests/netns/elastic_test.sh and bench/elastic_reset.sh share: an elastic hooprun job on
# the 3-host bed (testbed.sh --hosts 3) whose discovery script lists the hosts of a file the
# caller rewrites, its output stamped line by line with the time each line arrived, and waits
# on those lines. Times are epoch seconds with microseconds ($EPOCHREALTIME), so that a reset
# is measured from the line's arrival rather than from when a poll happened to see it.
#
# Offers: now, elapsed, make_discover_script, list_hosts, start_job, stop_job, wait_line,
# worker_in. Sets job_pid (hooprun's pid, empty once stopped) and stamp_pid (the stamping
# loop's, whose end means every writer of the output is gone).
#
# The caller sets, before the first call:
#   work     a private directory (mktemp -d) for the discovery script and the host list
#   hooprun  path to hooprun
#   train    the worker's program, as the job's command line names it: train_fashion_mnist,
#            or the script an interpreter runs (python3 SCRIPT), for worker_in
# and defines fail MESSAGE (report and exit), which start_job calls when hooprun does not
# start. start_job also needs the bed's TESTBED_SPAWNER and TESTBED_BRIDGE_ADDR.

job_pid=""
stamp_pid=""

now() { echo "$EPOCHREALTIME"; }
# Seconds from $1 to $2, to the millisecond.
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# The discovery script reads the list on every run, so rewriting $work/hosts is all it takes
# to make a host leave or come back.
make_discover_script() {
  printf '#!/bin/sh\ncat %s/hosts\n' "$work" >"$work/discover.sh"
  chmod +x "$work/discover.sh"
}
# Lists the hosts $@, one slot each.
list_hosts() {
  local h
  for h in "$@"; do echo "$h:1"; done >"$work/hosts.new"
  mv "$work/hosts.new" "$work/hosts"  # atomic: the script never reads half a list
}

# start_job OUT ARGS...: starts in the background an elastic hooprun of 3 workers (at least
# 2) on the bed; ARGS are the rest of its command line (more options, then the program and
# its arguments). Each line of the output goes to OUT prefixed with its arrival time, the
# start time to OUT.t0, hooprun's pid to OUT.pid and its exit code to OUT.rc.
start_job() {
  local out=$1
  shift
  now >"$out.t0"
  (
    "$hooprun" -np 3 --min-np 2 --host-discovery-script "$work/discover.sh" \
      --spawner "$TESTBED_SPAWNER" --rendezvous-addr "$TESTBED_BRIDGE_ADDR" \
      --elastic-timeout 30 --log-level INFO "$@" 2>&1 &
    echo $! >"$out.pid"
    wait $!
    # Written after the last line can still come: OUT.rc says hooprun ended, not the output.
    echo $? >"$out.rc"
  ) | while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done >"$out" &
  # shellcheck disable=SC2034  # for the caller, to know when the output is complete
  stamp_pid=$!
  for _ in $(seq 100); do [[ -s $out.pid ]] && break; sleep 0.05; done
  [[ -s $out.pid ]] || fail "hooprun did not start"
  job_pid=$(cat "$out.pid")
}

# stop_job OUT: ends a job still running; SIGTERM reaches every worker through hooprun. Waits
# up to 10 s for OUT.rc, so that the exit code is in before the caller removes $work.
stop_job() {
  local out=$1
  if [[ -n $job_pid ]] && kill -TERM "$job_pid" 2>/dev/null; then
    for _ in $(seq 100); do [[ -e $out.rc ]] && break; sleep 0.1; done
  fi
  job_pid=""
}

# wait_line FILE REGEX TIMEOUT [AFTER]: waits up to TIMEOUT seconds for a line of FILE matching
# the extended REGEX after line number AFTER (default 0); prints "line-number:time". A job that
# ended stops the wait.
wait_line() {
  local file=$1 re=$2 deadline after=${4:-0} hit ended=""
  deadline=$(awk -v n="$(now)" -v s="$3" 'BEGIN { printf "%.0f", n + s }')
  while :; do
    hit=$(awk -v after="$after" -v re="$re" 'NR > after && $0 ~ re { print NR ":" $1; exit }' "$file")
    [[ -n $hit ]] && { echo "$hit"; return 0; }
    # The job ended: one more look once its last lines are through.
    [[ -e $file.rc && -n ${ended:-} ]] && return 1
    [[ -e $file.rc ]] && { ended=1; sleep 0.3; continue; }
    (($(printf '%.0f' "$(now)") >= deadline)) && return 1
    # Short: the callers act on what they see (the next kill, the host listed again), and the
    # sooner they do, the less that action depends on this loop.
    sleep 0.02
  done
}

# The pids of the worker in namespace $1: the processes whose executable is $train, or that
# have $train as an argument (python3 SCRIPT). ip netns exec execs the command, so the worker is
# the namespace's process itself, whatever ran it.
worker_in() {
  local pid exe
  exe=$(readlink -f "$train")
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    if [[ $(readlink -f "/proc/$pid/exe" 2>/dev/null) == "$exe" ]] ||
      tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | grep -Fqx -e "$train" -e "$exe"; then
      echo "$pid"
    fi
  done
}
