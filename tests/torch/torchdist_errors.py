"""The torch.distributed backend's faults, each in a job of 2 processes started here with env://
variables (torchrun would end the survivor as soon as a worker dies, before it could report):

    python3 tests/torch/torchdist_errors.py

  killed    rank 1 dies (SIGKILL) before an all_reduce: rank 0's raises naming rank 1
  dtype     rank 1 passes int32 where rank 0 passes float32 (same bytes): both raise naming
            the dtype
  timeout   rank 1 never calls: rank 0's all_reduce raises within init_process_group's
            timeout (3 s)

Prints "errors: CASE ok" per case and exits 0, or each FAIL and exits 1.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta


def rank_main(case, rank):
    import torch
    import torch.distributed as dist

    import hoop.torch.distributed  # noqa: F401

    dist.init_process_group("hoop", timeout=timedelta(seconds=3))
    dist.all_reduce(torch.ones(1024))  # a good call first
    t = torch.ones(1024, dtype=torch.int32 if case == "dtype" and rank == 1 else torch.float32)
    if rank == 1 and case == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == 1 and case == "timeout":
        time.sleep(20)
        return 0
    start = time.monotonic()
    try:
        dist.all_reduce(t)
    except Exception as e:
        print(f"RAISED after {time.monotonic() - start:.1f} s: {e}", flush=True)
        return 3
    print("RETURNED", flush=True)
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(case):
    # The port is free when chosen and bound by rank 0's store a moment later; a process that
    # takes it in between fails the store's listen, and the case runs again on a fresh port.
    for _ in range(3):
        outs = run_once(case, free_port())
        if not any("address already in use" in out.lower() for out in outs):
            break
    return outs


def run_once(case, port):
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank", case, str(rank)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outs = []
    for rank, p in enumerate(procs):
        if rank == 1 and case == "timeout":
            # Rank 1 sleeps through rank 0's timeout; once rank 0 has reported, it has no more
            # part in the case (killed, rather than slept out: 17 s of the suite).
            p.kill()
        try:
            out, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\nHUNG"
        outs.append(out)
    return outs


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--rank":
        return rank_main(sys.argv[2], int(sys.argv[3]))
    failures = []
    expected = {
        "killed": {0: ["RAISED", "rank 1"]},
        "dtype": {0: ["RAISED", "dtype"], 1: ["RAISED", "dtype"]},
        "timeout": {0: ["RAISED", "timeout"]},
    }
    for case, ranks in expected.items():
        outs = run_case(case)
        for rank, words in ranks.items():
            missing = [w for w in words if w not in outs[rank]]
            if missing or "HUNG" in outs[rank]:
                failures.append(f"{case}: rank {rank} lacks {missing}: {outs[rank][-600:]}")
        if not any(f.startswith(case + ":") for f in failures):
            print(f"errors: {case} ok")
    for f in failures:
        print(f"FAIL {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
