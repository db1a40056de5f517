"""Inputs and float64 references the framework adapters' collective tests share: every rank
draws every rank's input from a seed of (rank, dtype, count), so each one computes the
reference itself. Dtypes and ops go by name ("bfloat16", "sum")."""

import ml_dtypes
import numpy as np

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
OPS = ["sum", "average", "min", "max", "product"]
TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-5, "complex64": 1e-5}


def np_dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def data(rank, dtype, count, seed=0):
    """Rank `rank`'s input: small values, so that sums and products stay exact in every type
    (products: +-1 and 2 only)."""
    rng = np.random.default_rng([rank, DTYPES.index(dtype), count, seed])
    kind = np_dtype(dtype).kind
    if dtype == "bool":
        return rng.integers(0, 2, count).astype(bool)
    if kind in "iu":
        low = 0 if kind == "u" else -3
        return rng.integers(low, 4, count).astype(np_dtype(dtype))
    if kind == "c":
        return (rng.uniform(-1, 1, count) + 1j * rng.uniform(-1, 1, count)).astype(dtype)
    return rng.uniform(-1, 1, count).astype(np_dtype(dtype))


def supported(dtype, op):
    """Whether hoop reduces `dtype` with `op` (the adapters refuse the rest, naming both)."""
    kind = np_dtype(dtype).kind
    if dtype == "bool":
        return op in ("min", "max")
    if kind == "u" and np_dtype(dtype).itemsize > 1:
        return op in ("sum", "product")
    if kind == "c":
        return op in ("sum", "average")
    return True


def reference(n, dtype, count, op):
    """The reduction over `n` ranks' inputs, computed in float64 (complex128)."""
    kind = np_dtype(dtype).kind
    wide = [data(r, dtype, count).astype(np.complex128 if kind == "c" else np.float64)
            for r in range(n)]
    if op == "sum":
        out = sum(wide)
    elif op == "average":
        out = sum(wide) / n
        if kind in "iub":
            out = np.trunc(out)
    elif op == "min":
        out = np.min(wide, axis=0)
    elif op == "max":
        out = np.max(wide, axis=0)
    else:
        out = np.prod(wide, axis=0)
    if kind in "iu" and op in ("sum", "product"):  # wraps around as the type does
        return out.astype(np.int64).astype(np_dtype(dtype)).astype(np.float64)
    return out


def close(got, want, dtype):
    """Whether `got` (an array of `dtype`) matches the float64 reference `want`."""
    got = np.asarray(got)
    wide = got.astype(np.complex128 if np_dtype(dtype).kind == "c" else np.float64)
    tol = TOL.get(dtype, 1e-12 if np_dtype(dtype).kind in "fc" else 0)
    return (got.shape == want.shape and got.dtype == np_dtype(dtype)
            and np.allclose(wide, want, rtol=tol, atol=tol))


def shares(rows, n):
    """The runtime's split of `rows` over `n` ranks: rows // n each, one more for the first
    rows % n ranks."""
    return [rows // n + (1 if r < rows % n else 0) for r in range(n)]


def ragged_splits(rank, n):
    """A rank's alltoall splits that differ per rank: 1 or 2 rows to each rank."""
    return [(rank + r) % 2 + 1 for r in range(n)]


def ragged_alltoall_want(rank, n):
    """What `rank` receives when every rank q sends rows arange(sum(splits)) + 1000 q."""
    want = []
    for q in range(n):
        theirs = ragged_splits(q, n)
        start = sum(theirs[:rank])
        want.extend(range(1000 * q + start, 1000 * q + start + theirs[rank]))
    return np.asarray(want)


# Data-parallel training checks: STEPS batches of BATCH rows per rank, FEATURES inputs and one
# regression target per row.
BATCH, STEPS, FEATURES = 8, 6, 5


def regression_batches(n):
    """(data, labels) of shapes (STEPS, BATCH * n, FEATURES) and (STEPS, BATCH * n, 1): the same
    on every rank; rank r trains on rows r * BATCH .. (r + 1) * BATCH of each batch."""
    rng = np.random.default_rng(11)
    data = rng.normal(size=(STEPS, BATCH * n, FEATURES)).astype(np.float32)
    labels = rng.normal(size=(STEPS, BATCH * n, 1)).astype(np.float32)
    return data, labels


def expect_min_refused(differentiate, error_type, check):
    """A gradient through an allreduce Min must raise error_type naming the op."""
    try:
        differentiate()
        check(False, "a gradient through allreduce Min was not refused")
    except error_type as e:
        check("allreduce with op Min has no gradient" in str(e), f"Min refusal: {e}")
