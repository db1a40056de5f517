#!/usr/bin/env bash
# The test bed leaves nothing behind: not after a failing command, not after a signal, not
# with processes still running inside its namespaces. Also checks the rate limit on both ends.
#   teardown_test.sh path/to/testbed.sh
set -uo pipefail
testbed=${1:?usage: teardown_test.sh path/to/testbed.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Names of this bed still present: namespaces and root-side links with its prefix.
leftovers() {
  local p=$1
  { ip netns list | awk '{print $1}'; ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1; } |
    grep "^$p[nvbp][0-9]*$" || true
}

# 1. A failing command: its exit code comes back and the bed is gone, including a process the
#    command left running in a namespace.
"$testbed" --hosts 2 --rate 100mbit -- bash -c '
  set -e
  echo "$TESTBED_PREFIX" > '"$work"'/prefix
  for ns in $TESTBED_NS; do
    tc -n "$ns" qdisc show dev eth0 | grep -q tbf
    tc qdisc show dev "${ns%n*}v${ns##*n}" | grep -q tbf
  done
  echo limited > '"$work"'/limited
  ip netns exec ${TESTBED_NS%% *} sleep 1000 &
  exit 3'
code=$?
[[ $code == 77 ]] && exit 77
[[ $code == 3 ]] || fail "testbed.sh exited with $code, expected the command's 3"
[[ -e $work/limited ]] || fail "--rate did not put a tbf qdisc on both ends of every link"
prefix=$(cat "$work/prefix")
left=$(leftovers "$prefix")
[[ -z $left ]] || fail "left behind after a failing command: $left"

# 2. SIGTERM to the test bed while its command runs.
"$testbed" --hosts 3 -- bash -c 'echo "$TESTBED_PREFIX" > '"$work"'/prefix2; sleep 1000' &
bed=$!
for _ in $(seq 100); do [[ -s $work/prefix2 ]] && break; sleep 0.1; done
[[ -s $work/prefix2 ]] || fail "the second bed never ran its command"
kill -TERM "$bed"
wait "$bed"
code=$?
[[ $code == 143 ]] || fail "testbed.sh exited with $code after SIGTERM, expected 143"
left=$(leftovers "$(cat "$work/prefix2")")
[[ -z $left ]] || fail "left behind after SIGTERM: $left"

# 3. The timeout ends a command that hangs.
"$testbed" --hosts 1 --timeout 1 -- sleep 1000
code=$?
[[ $code == 124 ]] || fail "testbed.sh exited with $code at its timeout, expected 124"
echo "PASS"
