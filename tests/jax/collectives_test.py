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

import hoop.jax as hvd  # noqa: E402
from harness import check, finish  # noqa: E402

hvd.init()
R, N = hvd.rank(), hvd.size()
DTYPES = [jnp.bool_, jnp.int8, jnp.int16, jnp.int32, jnp.int64, jnp.uint8, jnp.uint16,
          jnp.uint32, jnp.uint64, jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64,
          jnp.complex64, jnp.complex128]
COUNTS = [0, 1, 7, 65537]
OPS = {hvd.Sum: "sum", hvd.Average: "average", hvd.Min: "min", hvd.Max: "max",
       hvd.Product: "product"}
TOL = {jnp.float16: 2e-2, jnp.bfloat16: 5e-2, jnp.float32: 1e-5, jnp.complex64: 1e-5}


def data(rank, dtype, count, seed=0):
    """Rank `rank`'s input: small values, so that sums and products stay exact in every type
    (products: +-1 and 2 only)."""
    rng = np.random.default_rng([rank, DTYPES.index(dtype), count, seed])
    kind = np.dtype(dtype).kind
    if dtype == jnp.bool_:
        return jnp.asarray(rng.integers(0, 2, count).astype(bool))
    if kind in "iu":
        low = 0 if kind == "u" else -3
        return jnp.asarray(rng.integers(low, 4, count), dtype=dtype)
    if kind == "c":
        return jnp.asarray(rng.uniform(-1, 1, count) + 1j * rng.uniform(-1, 1, count), dtype=dtype)
    return jnp.asarray(rng.uniform(-1, 1, count), dtype=dtype)


def supported(dtype, op):
    kind = np.dtype(dtype).kind
    if dtype == jnp.bool_:
        return op in (hvd.Min, hvd.Max)
    if kind == "u" and np.dtype(dtype).itemsize > 1:
        return op in (hvd.Sum, hvd.Product)
    if kind == "c":
        return op in (hvd.Sum, hvd.Average)
    return True


def reference(dtype, count, op):
    xs = [np.asarray(data(r, dtype, count)) for r in range(N)]
    kind = np.dtype(dtype).kind
    wide = [x.astype(np.complex128 if kind == "c" else np.float64) for x in xs]
    if op == hvd.Sum:
        out = sum(wide)
    elif op == hvd.Average:
        out = sum(wide) / N
        if kind in "iub":
            out = np.trunc(out)
    elif op == hvd.Min:
        out = np.min(wide, axis=0)
    elif op == hvd.Max:
        out = np.max(wide, axis=0)
    else:
        out = np.prod(wide, axis=0)
    if kind in "iu" and op in (hvd.Sum, hvd.Product):  # wraps around as the type does
        return out.astype(np.int64).astype(np.dtype(dtype)).astype(np.float64)
    return out


def close(got, want, dtype, what):
    got = np.asarray(got)
    wide = got.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    tol = TOL.get(dtype, 1e-12 if np.dtype(dtype).kind in "fc" else 0)
    ok = got.shape == want.shape and np.allclose(wide, want, rtol=tol, atol=tol)
    check(ok and got.dtype == np.dtype(dtype), f"{what}: {got.dtype} {got[:4]} vs {want[:4]}")


def expect_refusal(fn, what):
    try:
        np.asarray(fn())
    except hvd.HoopValueError as e:  # raised when the call is made, also while jit traces
        check(f"{np.dtype(what[0])} cannot be reduced" in str(e), f"{what}: message {e}")
        return
    check(False, f"{what}: not refused")


def run_all(x, dtype):
    """Every collective of one input: the supported allreduce ops, broadcast from the last
    rank, allgather, alltoall of N copies and reducescatter of N + 1 copies (uneven shares)."""
    out = {OPS[op]: hvd.allreduce(x, op=op) for op in OPS if supported(dtype, op)}
    out["broadcast"] = hvd.broadcast(x, root_rank=N - 1)
    out["allgather"] = hvd.allgather(x)
    out["alltoall"] = hvd.alltoall(jnp.concatenate([x] * N) if x.shape[0] else x)
    if supported(dtype, hvd.Sum) and x.shape[0]:
        out["reducescatter"] = hvd.reducescatter(jnp.stack([x] * (N + 1)), op=hvd.Sum)
    return out


# One jitted program per dtype and count holds every collective, which keeps compilation
# (most of this test's time) to a few dozen programs.
jitted = jax.jit(run_all, static_argnums=1)
# Eagerly every call compiles a small program for its shapes once: the eager pass takes the
# counts 0 and 7, the jitted one all four (the handlers are the same).
for mode, fn, counts in (("eager", run_all, (0, 7)), ("jit", jitted, COUNTS)):
    for dtype in DTYPES:
        name = np.dtype(dtype).name
        for count in counts:
            x = data(R, dtype, count)
            got = fn(x, dtype)
            everyone = [np.asarray(data(r, dtype, count)) for r in range(N)]
            for op, op_name in OPS.items():
                if op_name in got:
                    close(got[op_name], reference(dtype, count, op), dtype,
                          f"{mode} allreduce {op_name} {name} x{count}")
                else:
                    expect_refusal(lambda op=op, x=x: (jax.jit(lambda a: hvd.allreduce(a, op=op))
                                                       if mode == "jit" else
                                                       (lambda a: hvd.allreduce(a, op=op)))(x),
                                   (dtype, f"{mode} allreduce {op_name} {name} x{count}"))
            check(np.array_equal(np.asarray(got["broadcast"]), everyone[N - 1]),
                  f"{mode} broadcast {name} x{count}")
            check(np.array_equal(np.asarray(got["allgather"]), np.concatenate(everyone)),
                  f"{mode} allgather {name} x{count}")
            want = np.concatenate(everyone) if count else np.asarray(x)
            check(np.array_equal(np.asarray(got["alltoall"]), want),
                  f"{mode} alltoall {name} x{count}")
            if "reducescatter" in got:
                full = reference(dtype, count, hvd.Sum)
                shares = [(N + 1) // N + (1 if r < (N + 1) % N else 0) for r in range(N)]
                start = sum(shares[:R])
                close(got["reducescatter"], np.stack([full] * (N + 1))[start:start + shares[R]],
                      dtype, f"{mode} reducescatter {name} x{count}")

# Eagerly, allgather and alltoall take first dimensions and splits that differ per rank.
ragged = jnp.arange(R + 1, dtype=jnp.float32) + 100 * R
got = np.asarray(hvd.allgather(ragged))
want = np.concatenate([np.arange(r + 1) + 100 * r for r in range(N)])
check(np.array_equal(got, want), "eager ragged allgather")
splits = [(R + r) % 2 + 1 for r in range(N)]
rows = jnp.arange(sum(splits), dtype=jnp.int32) + 1000 * R
got = np.asarray(hvd.alltoall(rows, splits=splits))
want = []
for r in range(N):
    theirs = [(r + q) % 2 + 1 for q in range(N)]
    start = sum(theirs[:R])
    want.extend(range(1000 * r + start, 1000 * r + start + theirs[R]))
check(np.array_equal(got, np.asarray(want)), f"eager alltoall with splits: {got} vs {want}")
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
