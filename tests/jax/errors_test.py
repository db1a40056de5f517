"""hoop.jax's failures: each one an exception naming its cause, on every rank, and no hang.

    errors_test.py mismatch   (2 ranks) shapes and dtypes that differ across ranks, eagerly and
                              under jit: every rank raises, naming the tensor and the field;
                              afterwards the job still works.
    errors_test.py killed     (N >= 2) the last rank dies; every other rank's next collective
                              raises HoopError naming it ("CAUGHT ..."), or the watchdog prints
                              HUNG.
Prints "OK errors_test <scenario>" (killed: "CAUGHT" per survivor); run by run_expect.py.
"""

import os
import signal
import sys
import threading
import time

import jax
import jax.numpy as jnp

import hoop.jax as hvd

hvd.init()
R, N = hvd.rank(), hvd.size()
scenario = sys.argv[1]
# Eagerly hoop.jax raises HoopError; under jax.jit JAX raises the failure of the compiled program
# (JaxRuntimeError, or ValueError from some paths), with hoop's message.
JAX_ERRORS = (hvd.HoopError, jax.errors.JaxRuntimeError, ValueError)


def expect_error(fn, *needles):
    try:
        jax.block_until_ready(fn())
    except JAX_ERRORS as e:
        text = str(e)
        missing = [n for n in needles if n not in text]
        if missing:
            print(f"rank {R}: the error lacks {missing}: {text}", flush=True)
            sys.exit(1)
        print(f"rank {R}: raised: {text}", flush=True)
        return
    print(f"rank {R}: NOT RAISED: {needles}", flush=True)
    sys.exit(1)


if scenario == "mismatch":
    shape = (4,) if R == 0 else (5,)
    expect_error(lambda: hvd.allreduce(jnp.ones(shape), name="shaped"), "'shaped'", "shape",
                 "[4] on rank 0", "[5] on rank 1")
    dtype = jnp.float32 if R == 0 else jnp.int32
    expect_error(lambda: jax.jit(lambda a: hvd.allreduce(a, name="typed"))(jnp.ones(3, dtype)),
                 "'typed'", "dtype")
    expect_error(lambda: hvd.broadcast(jnp.ones(2), root_rank=N), "root")
    total = hvd.allreduce(jnp.ones(3), op=hvd.Sum, name="after")
    assert float(total.sum()) == 3.0 * N, total
    print(f"OK errors_test mismatch", flush=True)
elif scenario == "killed":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # report what was caught before hooprun stops us
    step = jax.jit(lambda a: hvd.allreduce(a, name="step"))
    for _ in range(3):
        jax.block_until_ready(step(jnp.ones(1000)))
    if R == N - 1:
        os.kill(os.getpid(), signal.SIGKILL)

    def watchdog():
        time.sleep(20)
        print(f"HUNG rank {R}: no error within 20 s of the kill", flush=True)
        os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        for _ in range(100000):
            jax.block_until_ready(step(jnp.ones(1000)))
        print(f"rank {R}: the allreduces kept succeeding without rank {N - 1}", flush=True)
        os._exit(4)
    except JAX_ERRORS as e:
        named = f"rank {N - 1}" in str(e)
        print(f"CAUGHT naming rank {N - 1}={named}: {e}", flush=True)
        os._exit(0)
else:
    sys.exit(f"unknown scenario {scenario}")
hvd.shutdown()
