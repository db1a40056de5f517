"""A rank dying mid-run fails the survivors' pending and later operations with HoopError
instead of hanging them.

Run through run_expect.py: hooprun -np N (N >= 2). The last rank SIGKILLs itself while the
others are in a loop of allreduces; each survivor must print "CAUGHT <code>: <message>"
and exit 0. hooprun then reports the killed rank and exits nonzero. Survivors ignore the
SIGTERM with which hooprun stops a failed job, so they can report what they caught; a
watchdog makes a hanging survivor fail with "HUNG" instead.
"""

import os
import signal
import sys
import threading
import time

import torch

import hoop
import hoop.torch as hvd

HANG_LIMIT_S = 20.0

hvd.init()
R, N = hvd.rank(), hvd.size()
signal.signal(signal.SIGTERM, signal.SIG_IGN)


def watchdog():
    time.sleep(HANG_LIMIT_S)
    print(f"HUNG rank {R}: no HoopError within {HANG_LIMIT_S} s of the kill", flush=True)
    os._exit(3)


for step in range(5):
    hvd.allreduce(torch.ones(1000), name=f"warm.{step}")
if R == N - 1:
    os.kill(os.getpid(), signal.SIGKILL)

threading.Thread(target=watchdog, daemon=True).start()
pending = []
try:
    for i in range(3):
        pending.append(hvd.allreduce_async(torch.ones(1000), name=f"pending.{i}"))
    for step in range(100000):
        hvd.allreduce(torch.ones(1000), name=f"step.{step}")
    print(f"rank {R}: the allreduces kept succeeding without rank {N - 1}", flush=True)
    os._exit(4)
except hoop.HoopError as e:
    print(f"CAUGHT {e.code}: {e.message}", flush=True)
    # The pending handles fail with the same cause rather than hang.
    for h in pending:
        try:
            hvd.synchronize(h)
        except hoop.HoopError:
            pass
    print(f"PENDING FAILED rank {R}", flush=True)
    sys.stdout.flush()
    os._exit(0)
