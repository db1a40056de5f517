"""What the hoop.torch test scripts share: each runs under hooprun on every rank and fails
with an AssertionError naming the rank; rank 0 prints one "OK <check>" line per check."""

import hoop.torch as hvd

_rank = None


def _my_rank():
    # Remembered from the first check after init(), so that checks after shutdown() still know.
    global _rank
    if _rank is None:
        _rank = hvd.rank()
    return _rank


def check(condition, what):
    if not condition:
        raise AssertionError(f"rank {_my_rank()}: {what}")


def ok(what):
    if _my_rank() == 0:
        print(f"OK {what}", flush=True)
