"""Independent collectives in one jitted program run in the order they were traced, on every
rank alike.

XLA runs custom calls that do not depend on each other in whatever order their inputs become
ready, also concurrently on its thread pool. Each hoop.jax call blocks until every rank has
submitted its tensor, so ranks that start different calls first wait for each other for ever:
jax.collectives_np2 hung that way under load (rank 0 in an allreduce, rank 1 in the
reducescatter traced eight calls later). Here each call's input takes long to compute on one
rank only (a different rank for each call), so without an order every rank starts with a
different call and the first step hangs; with hoop.jax's ordered effect every step completes.
run_expect's timeout turns a hang into a failure. Prints "OK order_test at np N".
"""

import jax
import jax.numpy as jnp
import numpy as np

import harness
import hoop.jax as hvd
from harness import check, finish

harness.use(hvd)
hvd.init()
R, N = hvd.rank(), hvd.size()
CALLS = 8
STEPS = 10
ROWS = 256


def slow(x):
    """x again, after some milliseconds of matrix products."""
    m = jnp.full((ROWS, ROWS), 1e-3, jnp.float32)
    v = jax.lax.fori_loop(0, 100, lambda i, v: jnp.tanh(m @ v),
                          jnp.broadcast_to(x[:ROWS, None], (ROWS, ROWS)))
    return x + 0 * v[0, 0]


def program(x):
    outs = []
    for i in range(CALLS):
        y = slow(x + i) if i % N == R else x + i
        kind = i % 4
        if kind == 0:
            outs.append(hvd.allreduce(y, op=hvd.Sum))
        elif kind == 1:
            outs.append(hvd.reducescatter(jnp.stack([y] * (N + 1)), op=hvd.Sum))
        elif kind == 2:
            outs.append(hvd.allgather(y))
        else:
            outs.append(hvd.broadcast(y, root_rank=i % N))
    return outs


step = jax.jit(program)
x = jnp.arange(4 * ROWS, dtype=jnp.float32) + R
for _ in range(STEPS):
    outs = [np.asarray(o) for o in step(x)]
base = [np.arange(4 * ROWS, dtype=np.float32) + r for r in range(N)]
for i in range(CALLS):
    everyone = [b + i for b in base]
    kind = i % 4
    if kind == 0:
        want = sum(everyone)
    elif kind == 1:
        rows = (N + 1) // N + (1 if R < (N + 1) % N else 0)
        want = np.stack([sum(everyone)] * rows)
    elif kind == 2:
        want = np.concatenate(everyone)
    else:
        want = everyone[i % N]
    check(outs[i].shape == want.shape and np.allclose(outs[i], want), f"call {i}")
finish("order_test")
