#!/bin/sh
# HOOP_TIMELINE with the Communicator alone (hoop-bench uses no runtime): every collective is an
# event with its bytes, transport and rank count (and the allreduce's algorithm), in a file that
# parses; with %r every rank writes its own. `timeline.sh HOOPRUN HOOP_BENCH`.
set -u
hooprun=$1
bench=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
HOOP_TIMELINE="$dir/rank%r.json" "$hooprun" -np 2 "$bench" --collective all -b 64 -e 64K -f 32 \
  -n 1 -w 0 >"$dir/out" 2>&1 || { cat "$dir/out"; echo "FAIL: hoop-bench failed"; exit 1; }
exec /usr/bin/python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
for rank in (0, 1):
    events = json.load(open(f"{d}/rank{rank}.json"))  # a complete JSON array
    begins = [e for e in events if e.get("ph") == "B"]
    names = {e["name"] for e in begins}
    want = {"ALLREDUCE", "BROADCAST", "ALLGATHER", "REDUCE_SCATTER", "ALLTOALL", "REDUCE",
            "GATHER", "SCATTER", "BARRIER"}
    missing = want - names
    assert not missing, f"rank {rank}: no event for {sorted(missing)}; got {sorted(names)}"
    ends = sum(1 for e in events if e.get("ph") == "E")
    assert ends == len(begins), f"rank {rank}: {len(begins)} begins, {ends} ends"
    for e in begins:
        a = e.get("args", {})
        assert e["pid"] == rank and a.get("ranks") == "2" and a.get("transport") == "shm" \
            and "bytes" in a, f"rank {rank}: {e}"
        if e["name"] == "ALLREDUCE":
            assert a.get("algorithm"), f"rank {rank}: an allreduce without its algorithm: {e}"
    print(f"rank {rank}: {len(begins)} collectives, kinds {sorted(names)}")
print("timeline: ok")
PY
