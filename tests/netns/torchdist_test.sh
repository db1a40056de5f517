#!/usr/bin/env bash
# Inside testbed.sh: torch.distributed's backend "hoop" across two simulated hosts under hooprun,
# with none of torch's variables set: init_process_group("hoop") meets through hooprun's store,
# and each group's rank 0 serves its hoop store at its own address on the bed, where the other
# host reaches it. The script checks every call against gloo (torchdist_check.py).
#
#   testbed.sh --hosts 2 -- torchdist_test.sh HOOPRUN PYTHON SCRIPT
set -euo pipefail
readonly kUsage="usage: torchdist_test.sh HOOPRUN PYTHON SCRIPT"
hooprun=${1:?$kUsage}
python=${2:?$kUsage}
script=${3:?$kUsage}
source "$(dirname "$0")/bed_hosts.sh"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# gloo picks its interface from the host name, which every namespace shares with the root.
export GLOO_SOCKET_IFNAME=eth0
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE
rc=0
timeout 150 "$hooprun" -np 2 -H "$(bed_hosts 2)" --spawner "$TESTBED_SPAWNER" \
  --rendezvous-addr "$TESTBED_BRIDGE_ADDR" "$python" "$script" >"$out" 2>&1 || rc=$?
cat "$out"
checked=$(grep -c "torchdist checked" "$out" || true)
if [[ $rc != 0 || $checked != 2 ]]; then
  echo "torchdist_test: FAIL: hooprun exited with $rc; $checked of 2 ranks checked"
  exit 1
fi
echo "torchdist_test: both hosts' ranks checked every call"
