"""A rank whose call fails and that then shuts down must not leave the others hanging: rank 0
submits a name twice (refused with hoop.HoopError), finishes the first submission and shuts
down; every other rank's next collective (a barrier) then fails naming rank 0, at once.
Run under hooprun -np 2 (or more), under a deadline (run_expect.py --timeout): a hang fails.
"""

import time

import torch

import hoop
import hoop.torch as hvd

hvd.init()
R = hvd.rank()
t = torch.ones(4)
h = hvd.allreduce_async(t, name="dup")
if R == 0:
    try:
        hvd.allreduce_async(t, name="dup")
        print("NOT RAISED", flush=True)
    except hoop.HoopError as e:
        print(f"DUPLICATE REFUSED: {e}", flush=True)
    hvd.synchronize(h)
    hvd.shutdown()
else:
    hvd.synchronize(h)
    start = time.monotonic()
    try:
        hvd.barrier()
        print("BARRIER RETURNED", flush=True)
    except hoop.HoopError as e:
        took = time.monotonic() - start
        named = "rank 0" in str(e)
        print(f"BARRIER FAILED naming rank 0={named} after {took:.1f} s: {e}", flush=True)
