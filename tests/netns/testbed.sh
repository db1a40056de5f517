#!/usr/bin/env bash
# A test bed of simulated hosts on this machine: one network namespace per host, each joined by
# a veth pair to a bridge in the root namespace, optionally rate-limited like a real link.
#
#   testbed.sh [--hosts K] [--rate RATE [--burst BYTES]] [--timeout S] -- command [args...]
#       Builds the bed, runs the command with the variables below, and always takes the bed
#       down again (after success, failure, a signal or the timeout). Exits with the command's
#       code, 124 when the timeout ended it, 77 when the bed cannot be built here (not root, no
#       `ip netns`): ctest reads 77 as "skipped". --burst sets the token bucket of the rate
#       limit (default: 10 ms of traffic, at least 64 KiB). A bucket larger than a message lets
#       the message through at memory speed whenever the link was idle before, as no real link
#       does: to time messages as a link of that rate would, give a small one (65536).
#   testbed.sh link-down NS [AFTER_SECONDS]   Takes NS's link down (now, or in the background
#       after AFTER_SECONDS), as a pulled cable would: the root-side end of its veth goes down.
#   testbed.sh link-up NS                     Brings it back.
#   testbed.sh rate NS RATE|off               Limits NS's link to RATE both ways from now on
#       (the bucket as --rate makes it), or lifts the limit: a test slows a job down while it
#       waits for an event, so that the job cannot end first however fast the machine is.
#   testbed.sh sweep                          Removes beds whose owner process is gone (left by
#       a `kill -9` of this script, which no trap survives).
#
# The command sees:
#   TESTBED_NS           the namespaces (host names for hooprun -H), space-separated
#   TESTBED_ADDRS        their eth0 addresses, in the same order
#   TESTBED_BRIDGE_ADDR  the root namespace's address on the bridge (for --rendezvous-addr)
#   TESTBED_SPAWNER      "ip netns exec {host}" (for hooprun --spawner)
#   TESTBED_PREFIX       what every name of this bed starts with
set -euo pipefail

readonly kSkip=77
# Names carry the owner's pid, so that a sweep can tell live beds from abandoned ones and two
# beds never share a name. Linux interface names hold at most 15 characters: hoop<pid>v<i> fits.
prefix="hoop$$"

die() {
  echo "testbed: $*" >&2
  exit 2
}

ns_name() { echo "${prefix}n$1"; }

# The root-side veth end of namespace NS (hoop<pid>n<i> -> hoop<pid>v<i>).
root_veth() {
  [[ $1 =~ ^(hoop[0-9]+)n([0-9]+)$ ]] || die "'$1' is not a test bed namespace"
  echo "${BASH_REMATCH[1]}v${BASH_REMATCH[2]}"
}

# Deletes everything named with prefix $1; each step may find its object already gone.
teardown_prefix() {
  local p=$1 ns pid dev
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${p}n[0-9]*$" || true); do
    # A process left in the namespace would keep it (and its veth) alive after `ip netns del`.
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
    grep -E "^${p}(v[0-9]+|b)$" || true); do
    ip link del "$dev" 2>/dev/null || true
  done
}

sweep() {
  local ns owner
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^hoop[0-9]+n[0-9]+$' || true); do
    owner=${ns#hoop}
    owner=${owner%%n*}
    if ! kill -0 "$owner" 2>/dev/null; then teardown_prefix "hoop$owner"; fi
  done
}

# RATE as tc writes it (500mbit, 1gbit, 10gbit, 800kbit, 1000000bit) -> bytes per second.
rate_bytes() {
  [[ $1 =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || die "--rate '$1': expected e.g. 100mbit, 1gbit"
  local n=${BASH_REMATCH[1]} scale=1
  case ${BASH_REMATCH[2]} in
    kbit) scale=1000 ;; mbit) scale=1000000 ;; gbit) scale=1000000000 ;;
  esac
  echo $((n * scale / 8))
}

# Limits egress of device $1 (in namespace $2, or the root one when empty) to $rate. The bucket
# holds --burst bytes, by default 10 ms of traffic, and at least 64 KiB: veth hands over
# TSO-sized packets that a smaller bucket could never pass.
limit_rate() {
  local dev=$1 ns=$2 bytes burst
  bytes=$(rate_bytes "$rate")
  burst=${burst_bytes:-$((bytes / 100))}
  ((burst >= 65536)) || burst=65536
  ip ${ns:+-n "$ns"} link set "$dev" up
  tc ${ns:+-n "$ns"} qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms
}

# A 10.X.0.0/24 subnet not used on this machine, X derived from the pid to spread beds out.
choose_subnet() {
  local x i used
  used=$(ip -4 -o addr show 2>/dev/null || true)
  for ((i = 0; i < 200; i++)); do
    x=$(((($$ + i) % 200) + 20))
    if ! grep -q " 10\.$x\.0\." <<<"$used"; then
      echo "$x"
      return
    fi
  done
  die "no free 10.X.0.0/24 subnet"
}

build() {
  local x bridge i ns veth
  x=$(choose_subnet)
  bridge="${prefix}b"
  # The first namespace tells whether this machine lets us build beds at all.
  if ! ip netns add "$(ns_name 1)" 2>/dev/null; then
    echo "SKIP: cannot create network namespaces here (ip netns add failed)" >&2
    exit $kSkip
  fi
  # Bridged frames must not meet the root namespace's packet filter (br_netfilter).
  ip link add "$bridge" type bridge nf_call_iptables 0 2>/dev/null || ip link add "$bridge" type bridge
  ip addr add "10.$x.0.1/24" dev "$bridge"
  ip link set "$bridge" up
  TESTBED_NS=""
  TESTBED_ADDRS=""
  for ((i = 1; i <= hosts; i++)); do
    ns=$(ns_name "$i")
    veth="${prefix}v$i"
    ((i == 1)) || ip netns add "$ns"
    ip link add "$veth" type veth peer name "${prefix}p$i"
    ip link set "${prefix}p$i" netns "$ns"
    ip -n "$ns" link set "${prefix}p$i" name eth0
    ip -n "$ns" addr add "10.$x.0.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip link set "$veth" master "$bridge" up
    if [[ -n $rate ]]; then
      limit_rate "$veth" ""
      limit_rate eth0 "$ns"
    fi
    TESTBED_NS+="${TESTBED_NS:+ }$ns"
    TESTBED_ADDRS+="${TESTBED_ADDRS:+ }10.$x.0.$((10 + i))"
  done
  export TESTBED_NS TESTBED_ADDRS TESTBED_PREFIX=$prefix
  export TESTBED_BRIDGE_ADDR="10.$x.0.1" TESTBED_SPAWNER="ip netns exec {host}"
}

case ${1:-} in
  link-down)
    [[ $# -ge 2 ]] || die "usage: testbed.sh link-down NS [AFTER_SECONDS]"
    veth=$(root_veth "$2")
    if [[ ${3:-0} == 0 ]]; then
      ip link set "$veth" down
    else
      (sleep "$3" && ip link set "$veth" down) </dev/null >/dev/null 2>&1 &
    fi
    exit 0
    ;;
  link-up)
    [[ $# -ge 2 ]] || die "usage: testbed.sh link-up NS"
    ip link set "$(root_veth "$2")" up
    exit 0
    ;;
  rate)
    [[ $# -eq 3 ]] || die "usage: testbed.sh rate NS RATE|off"
    veth=$(root_veth "$2")
    burst_bytes=""
    [[ $3 == off ]] || rate_bytes "$3" >/dev/null
    tc qdisc del dev "$veth" root 2>/dev/null || true
    tc -n "$2" qdisc del dev eth0 root 2>/dev/null || true
    if [[ $3 != off ]]; then
      rate=$3
      limit_rate "$veth" ""
      limit_rate eth0 "$2"
    fi
    exit 0
    ;;
  sweep)
    sweep
    exit 0
    ;;
esac

hosts=2
rate=""
burst_bytes=""
timeout_s=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --hosts) hosts=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --burst) burst_bytes=${2:?}; shift 2 ;;
    --timeout) timeout_s=${2:?}; shift 2 ;;
    --) shift; break ;;
    -*) die "unknown option '$1'" ;;
    *) break ;;
  esac
done
usage="testbed.sh [--hosts K] [--rate RATE [--burst BYTES]] [--timeout S] -- command [args...]"
[[ $# -gt 0 ]] || die "usage: $usage"
[[ $hosts =~ ^[1-9][0-9]?$ ]] || die "--hosts '$hosts': expected 1 to 99"
[[ -z $rate ]] || rate_bytes "$rate" >/dev/null
[[ -z $burst_bytes || $burst_bytes =~ ^[1-9][0-9]*$ ]] || die "--burst '$burst_bytes': expected bytes"
if [[ $(id -u) != 0 ]] || ! ip netns list >/dev/null 2>&1; then
  echo "SKIP: the network-namespace test bed needs root and 'ip netns'" >&2
  exit $kSkip
fi

child=""
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  if [[ -n $child ]]; then
    kill -KILL "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null
  fi
  teardown_prefix "$prefix"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sweep
build
# In the background, so that a signal to this script runs the trap at once instead of after
# the command ends.
if [[ -n $timeout_s ]]; then
  timeout --kill-after=5 "$timeout_s" "$@" &
else
  "$@" &
fi
child=$!
set +e
wait "$child"
code=$?
child=""
exit "$code"
