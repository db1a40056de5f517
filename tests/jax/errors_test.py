"""hoop.jax's failures: each one an exception naming its cause, on every rank, and no hang.

    errors_test.py mismatch   (2 ranks) shapes and dtypes that differ across ranks, eagerly and
                              under jit: every rank raises, naming the tensor and the field;
                              afterwards the job still works.
    errors_test.py killed     (N >= 2) the last rank dies; every other rank's next collective
                              raises HoopError naming it ("CAUGHT ..."), or the watchdog prints
                              HUNG.
Prints "OK errors_test <scenario>" (killed: "CAUGHT" per survivor); run by run_expect.py.
"""

import sys

import jax
import jax.numpy as jnp

import harness
import hoop.jax as hvd

harness.use(hvd)
hvd.init()
R, N = hvd.rank(), hvd.size()
scenario = sys.argv[1]
# Eagerly hoop.jax raises HoopError; under jax.jit JAX raises the failure of the compiled program
# (JaxRuntimeError, or ValueError from some paths), with hoop's message.
JAX_ERRORS = (hvd.HoopError, jax.errors.JaxRuntimeError, ValueError)


def expect_error(fn, *needles):
    harness.expect_error(lambda: jax.block_until_ready(fn()), JAX_ERRORS, *needles)


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
    step = jax.jit(lambda a: hvd.allreduce(a, name="step"))
    harness.survive_killed_rank(lambda: jax.block_until_ready(step(jnp.ones(1000))), JAX_ERRORS)
else:
    sys.exit(f"unknown scenario {scenario}")
hvd.shutdown()
