"""hoop.jax's collectives against a float64 reference, every dtype JAX has, under jax.jit with
counts 0, 1, 7 (prime) and 65537 (large, prime) and eagerly with 0 and 7, on however many ranks
hooprun started.

Every rank draws every rank's input from a seed of (rank, dtype, count), so each one computes
the reference itself. An op hoop.jax refuses for a dtype (min on complex numbers, an average of
unsigned integers) must raise HoopValueError naming the dtype, on every rank. Prints
"OK collectives_test at np N" at the end.
"""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import harness  # noqa: E402
import hoop.jax as hvd  # noqa: E402
from harness import check, finish  # noqa: E402
from reference import (DTYPES, close, data, ragged_alltoall_want, ragged_splits,  # noqa: E402
                       reference, shares, supported)

harness.use(hvd)
hvd.init()
R, N = hvd.rank(), hvd.size()
COUNTS = [0, 1, 7, 65537]
OPS = {hvd.Sum: "sum", hvd.Average: "average", hvd.Min: "min", hvd.Max: "max",
       hvd.Product: "product"}


def same(got, dtype, count, op, what):
    got = np.asarray(got)
    want = reference(N, dtype, count, op)
    check(close(got, want, dtype), f"{what}: {got.dtype} {got[:4]} vs {want[:4]}")


def expect_refusal(fn, what):
    try:
        np.asarray(fn())
    except hvd.HoopValueError as e:  # raised when the call is made, also while jit traces
        check(f"{what[0]} cannot be reduced" in str(e), f"{what}: message {e}")
        return
    check(False, f"{what}: not refused")


def run_all(x, dtype):
    """Every collective of one input: the supported allreduce ops, broadcast from the last
    rank, allgather, alltoall of N copies and reducescatter of N + 1 copies (uneven shares)."""
    out = {OPS[op]: hvd.allreduce(x, op=op) for op in OPS if supported(dtype, OPS[op])}
    out["broadcast"] = hvd.broadcast(x, root_rank=N - 1)
    out["allgather"] = hvd.allgather(x)
    out["alltoall"] = hvd.alltoall(jnp.concatenate([x] * N) if x.shape[0] else x)
    if supported(dtype, "sum") and x.shape[0]:
        out["reducescatter"] = hvd.reducescatter(jnp.stack([x] * (N + 1)), op=hvd.Sum)
    return out


# One jitted program per dtype and count holds every collective, which keeps compilation
# (most of this test's time) to a few dozen programs.
jitted = jax.jit(run_all, static_argnums=1)
# Eagerly every call compiles a small program for its shapes once: the eager pass takes the
# counts 0 and 7, the jitted one all four (the handlers are the same).
for mode, fn, counts in (("eager", run_all, (0, 7)), ("jit", jitted, COUNTS)):
    for name in DTYPES:
        for count in counts:
            x = jnp.asarray(data(R, name, count))
            got = fn(x, name)
            everyone = [data(r, name, count) for r in range(N)]
            for op, op_name in OPS.items():
                if op_name in got:
                    same(got[op_name], name, count, op_name,
                         f"{mode} allreduce {op_name} {name} x{count}")
                else:
                    expect_refusal(lambda op=op, x=x: (jax.jit(lambda a: hvd.allreduce(a, op=op))
                                                       if mode == "jit" else
                                                       (lambda a: hvd.allreduce(a, op=op)))(x),
                                   (name, f"{mode} allreduce {op_name} {name} x{count}"))
            check(np.array_equal(np.asarray(got["broadcast"]), everyone[N - 1]),
                  f"{mode} broadcast {name} x{count}")
            check(np.array_equal(np.asarray(got["allgather"]), np.concatenate(everyone)),
                  f"{mode} allgather {name} x{count}")
            want = np.concatenate(everyone) if count else np.asarray(x)
            check(np.array_equal(np.asarray(got["alltoall"]), want),
                  f"{mode} alltoall {name} x{count}")
            if "reducescatter" in got:
                full = reference(N, name, count, "sum")
                share = shares(N + 1, N)
                start = sum(share[:R])
                want = np.stack([full] * (N + 1))[start:start + share[R]]
                got_rs = np.asarray(got["reducescatter"])
                check(close(got_rs, want, name), f"{mode} reducescatter {name} x{count}")

# Eagerly, allgather and alltoall take first dimensions and splits that differ per rank.
ragged = jnp.arange(R + 1, dtype=jnp.float32) + 100 * R
got = np.asarray(hvd.allgather(ragged))
want = np.concatenate([np.arange(r + 1) + 100 * r for r in range(N)])
check(np.array_equal(got, want), "eager ragged allgather")
splits = ragged_splits(R, N)
rows = jnp.arange(sum(splits), dtype=jnp.int32) + 1000 * R
got = np.asarray(hvd.alltoall(rows, splits=splits))
want = ragged_alltoall_want(R, N)
check(np.array_equal(got, want), f"eager alltoall with splits: {got} vs {want}")
# Scales and a grouped call (one negotiation, fused) of mixed dtypes.
a, b = jnp.ones(5, jnp.float32), jnp.full(3, 2.0, jnp.float64)
ga, gb = jax.jit(lambda p, q: hvd.grouped_allreduce([p, q], op=hvd.Sum, prescale_factor=0.5,
                                                    postscale_factor=3.0))(a, b)
check(np.allclose(np.asarray(ga), 1.5 * N) and np.allclose(np.asarray(gb), 3.0 * N),
      "grouped allreduce with scales")
tree = {"w": jnp.full((2, 2), float(R)), "b": [jnp.asarray(R, jnp.int32)]}
same = hvd.broadcast_parameters(tree, root_rank=0)
check(float(same["w"].sum()) == 0.0 and int(same["b"][0]) == 0, "broadcast_parameters")
finish("collectives_test")
