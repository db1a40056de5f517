#!/usr/bin/env bash
# A Ray cluster of two nodes on the netns test bed (tests/netns/testbed.sh --hosts 2): the head
# started with `ray start --head` on the first simulated host, a second node with
# `ray start --address` on the second, each with one CPU, so the two workers land one per node;
# examples/ray_fashion_mnist.py then trains through hoop across the two hosts as a user would
# run it (--address), and must print its epoch line with the ranks on two nodes.
#
#   testbed.sh --hosts 2 -- ray_cluster.sh ENGINES_PYTHON REPO BUILD
set -euo pipefail
python=$1 repo=$2 build=$3
bin=$(dirname "$python")
read -r -a hosts <<<"$TESTBED_NS"
read -r -a addrs <<<"$TESTBED_ADDRS"
work=$(mktemp -d)
export PYTHONPATH="$build/python:$repo/examples"
# One cluster of this test's own: no token left by another Ray instance applies.
export RAY_AUTH_MODE=disabled
on() {  # on HOST_INDEX command...: runs it on that simulated host, as that host
  local i=$1
  shift
  ip netns exec "${hosts[$i]}" env HOOP_HOST_ID="${hosts[$i]}" "$@"
}
# Not `ray stop`: it ends every Ray process of the machine, those of a Ray instance another test
# runs beside this one included (whose stopped workers the kernel then continues, their process
# groups orphaned). This cluster's processes are the ones in its hosts' network namespaces.
stop() {
  local i pids
  for sig in TERM KILL; do
    for i in 0 1; do
      pids=$(ip netns pids "${hosts[$i]}" 2>/dev/null || true)
      [ -n "$pids" ] && kill "-$sig" $pids 2>/dev/null
    done
    [ "$sig" = TERM ] && sleep 2
  done
  rm -rf "$work"
}
trap stop EXIT
on 0 "$bin/ray" start --head --node-ip-address "${addrs[0]}" --port 6379 --num-cpus 1 \
  --include-dashboard false --temp-dir "$work/head" --disable-usage-stats >/dev/null
on 1 "$bin/ray" start --address "${addrs[0]}:6379" --node-ip-address "${addrs[1]}" \
  --num-cpus 1 --temp-dir "$work/node" --disable-usage-stats >/dev/null
out=$(on 0 "$python" "$repo/examples/ray_fashion_mnist.py" --address "${addrs[0]}:6379" \
  --epochs 1 --max-steps 40 2>&1) || {
  echo "$out"
  exit 1
}
echo "$out"
grep -q "test accuracy [0-9.]* %" <<<"$out" || { echo "FAIL: no epoch line"; exit 1; }
grep -q "2 workers on 2 nodes" <<<"$out" || { echo "FAIL: the workers did not span 2 nodes"; exit 1; }
echo "OK ray cluster of 2 nodes"
