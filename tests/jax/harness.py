"""What the hoop.jax test scripts share: failures are collected, each printed with the rank,
and finish() ends the script, exit 1 after any failure, else printing the OK line."""

import sys

import hoop.jax as hvd

failures = []


def check(ok, what):
    """Records `what` as a failure unless `ok`."""
    if not ok:
        failures.append(what)
        print(f"rank {hvd.rank()}: FAIL {what}", flush=True)


def finish(script):
    """After a barrier: exit 1 if anything failed, else "OK <script> at np N" and shutdown."""
    hvd.barrier()
    if failures:
        print(f"rank {hvd.rank()}: {len(failures)} failures", flush=True)
        sys.exit(1)
    print(f"OK {script} at np {hvd.size()}", flush=True)
    hvd.shutdown()
