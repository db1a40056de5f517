"""What the framework adapters' test scripts (tests/jax, tests/tensorflow) share: failures are
collected, each printed with the rank, and finish() ends the script, exit 1 after any failure,
else printing the OK line; the error scenarios' expectations. use(hvd) names the adapter module
under test."""

import os
import signal
import sys
import threading
import time

_hvd = None
failures = []


def use(hvd):
    """The adapter (hoop.jax, hoop.tensorflow, ...) whose rank, barrier and shutdown to use."""
    global _hvd
    _hvd = hvd


def check(ok, what):
    """Records `what` as a failure unless `ok`."""
    if not ok:
        failures.append(what)
        print(f"rank {_hvd.rank()}: FAIL {what}", flush=True)


def finish(script):
    """After a barrier: exit 1 if anything failed, else "OK <script> at np N" and shutdown."""
    _hvd.barrier()
    if failures:
        print(f"rank {_hvd.rank()}: {len(failures)} failures", flush=True)
        sys.exit(1)
    print(f"OK {script} at np {_hvd.size()}", flush=True)
    _hvd.shutdown()


def expect_error(fn, errors, *needles):
    """Runs fn(), which must raise one of `errors` whose text holds every needle; else exits 1."""
    rank = _hvd.rank()
    try:
        fn()
    except errors as e:
        text = str(e)
        missing = [n for n in needles if n not in text]
        if missing:
            print(f"rank {rank}: the error lacks {missing}: {text}", flush=True)
            sys.exit(1)
        print(f"rank {rank}: raised: {text.splitlines()[0]}", flush=True)
        return
    print(f"rank {rank}: NOT RAISED: {needles}", flush=True)
    sys.exit(1)


def survive_killed_rank(step, errors):
    """The "killed" scenario: after a few steps the last rank kills itself; every other rank
    runs step() until it raises one of `errors` and prints "CAUGHT naming rank <last>=<bool>",
    or prints HUNG when nothing is raised within 20 s."""
    rank, size = _hvd.rank(), _hvd.size()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # report what was caught before hooprun stops us
    for _ in range(3):
        step()
    if rank == size - 1:
        os.kill(os.getpid(), signal.SIGKILL)

    def watchdog():
        time.sleep(20)
        print(f"HUNG rank {rank}: no error within 20 s of the kill", flush=True)
        os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        for _ in range(100000):
            step()
        print(f"rank {rank}: the collectives kept succeeding without rank {size - 1}", flush=True)
        os._exit(4)
    except errors as e:
        named = f"rank {size - 1}" in str(e)
        print(f"CAUGHT naming rank {size - 1}={named}: {str(e).splitlines()[0]}", flush=True)
        os._exit(0)
