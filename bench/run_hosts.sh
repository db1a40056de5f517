#!/usr/bin/env bash
# Runs hoop's allreduce across the simulated hosts of the network-namespace test bed, one peer
# per algorithm (hierarchical, flat ring, auto by default; "hierarchical-serial" is the
# hierarchical allreduce without its segment pipeline), through bench/run_peers.sh, so the
# table shows their median times side by side. Run it inside tests/netns/testbed.sh:
#
#   tests/netns/testbed.sh --hosts 2 --rate 1gbit --timeout 1800 -- \
#       bench/run_hosts.sh --per-host 2 [--algos "hierarchical ring auto"] [run_peers options]
#
# Every other option goes to run_peers.sh (-R, -b, -e, -f, -n, -w, --split, --large-iters ...).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
per_host=2
algos="hierarchical ring auto"
declare -a rest=()
while (($#)); do
  case "$1" in
    --per-host) per_host="$2"; shift 2 ;;
    --algos) algos="$2"; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done

if [[ -z "${TESTBED_NS:-}" || -z "${TESTBED_BRIDGE_ADDR:-}" ]]; then
  echo "run_hosts.sh: run me inside tests/netns/testbed.sh (TESTBED_NS is not set)" >&2
  exit 2
fi

# run_peers.sh splits a peer's command line at spaces, so the spawner must be one word: a
# script per host that enters its namespace.
wrappers="$(mktemp -d "${TMPDIR:-/tmp}/hoop-hosts.XXXXXX")"
trap 'rm -rf "$wrappers"' EXIT
hosts=""
count=0
for ns in $TESTBED_NS; do
  printf '#!/bin/sh\nexec ip netns exec %s "$@"\n' "$ns" >"$wrappers/$ns"
  chmod +x "$wrappers/$ns"
  hosts+="${hosts:+,}$ns:$per_host"
  count=$((count + 1))
done
n=$((count * per_host))

declare -a peers=()
for algo in $algos; do
  # "hierarchical-serial": the hierarchical allreduce with its three phases one after the other
  # (no segment pipeline), to measure what the pipeline gains.
  prefix=""
  if [[ "$algo" == hierarchical-serial ]]; then
    prefix="env HOOP_HIERARCHICAL_SEGMENT_BYTES=0 "
  fi
  peers+=(--peer "$algo=$prefix{bin}/hooprun -np {n} -H $hosts --spawner $wrappers/{host} --rendezvous-addr $TESTBED_BRIDGE_ADDR {bin}/hoop-bench --collective allreduce --algo ${algo%-serial}")
done
"$here/run_peers.sh" --ranks "$n" --only-extra "${peers[@]}" "${rest[@]}"
