"""hoop.tensorflow's collectives against a float64 reference, every dtype TensorFlow has, inside
tf.function with counts 0, 1, 7 (prime) and 65537 (large, prime) and eagerly with 0 and 7, on
however many ranks hooprun started.

Every rank draws every rank's input from a seed of (rank, dtype, count) (tests/frameworks), so
each one computes the reference itself. An op hoop.tensorflow refuses for a dtype (min on
complex numbers, an average of unsigned integers) must raise HoopValueError naming the dtype,
on every rank. Prints "OK collectives_test at np N" at the end.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.autograph.impl.api import StagingError  # noqa: E402

import harness  # noqa: E402
import hoop.tensorflow as hvd  # noqa: E402
from harness import check, finish  # noqa: E402
from reference import (DTYPES, OPS, close, data, ragged_alltoall_want,  # noqa: E402
                       ragged_splits, reference, shares, supported)

harness.use(hvd)
hvd.init()
R, N = hvd.rank(), hvd.size()
COUNTS = [0, 1, 7, 65537]
OP_OF = {"sum": hvd.Sum, "average": hvd.Average, "min": hvd.Min, "max": hvd.Max,
         "product": hvd.Product}


def run_all(x, copies, stacked, dtype):
    """Every collective of one input: the supported allreduce ops, broadcast from the last
    rank, allgather, alltoall of N copies and reducescatter of N + 1 copies (uneven shares;
    the copies are made outside, as TensorFlow's graph optimizer turns them into ops that lack
    some dtypes)."""
    out = {op: hvd.allreduce(x, op=OP_OF[op]) for op in OPS if supported(dtype, op)}
    out["broadcast"] = hvd.broadcast(x, root_rank=N - 1)
    out["allgather"] = hvd.allgather(x)
    out["alltoall"] = hvd.alltoall(copies)[0]
    if supported(dtype, "sum"):
        out["reducescatter"] = hvd.reducescatter(stacked, op=hvd.Sum)
    return out


def expect_refusal(fn, dtype, what):
    try:
        fn()
    except (hvd.HoopValueError, StagingError) as e:
        # Raised when the call is made; while tf.function traces, autograph re-raises it as a
        # StagingError carrying the message.
        check(f"{dtype} cannot be reduced" in str(e), f"{what}: message {e}")
        return
    check(False, f"{what}: not refused")


def host(t):
    return t.numpy()


# One tf.function per dtype and count holds every collective; its collectives are in flight
# together, and fuse.
graphs = {}
for mode, counts in (("eager", (0, 7)), ("graph", COUNTS)):
    for dtype in DTYPES:
        for count in counts:
            mine = data(R, dtype, count)
            x = tf.constant(mine)
            fn = lambda *a, d=dtype: run_all(*a, d)  # noqa: E731
            if mode == "graph":
                fn = tf.function(fn)
            got = {k: host(v) for k, v in fn(x, tf.constant(np.concatenate([mine] * N)),
                                            tf.constant(np.stack([mine] * (N + 1)))).items()}
            everyone = [data(r, dtype, count) for r in range(N)]
            for op in OPS:
                what = f"{mode} allreduce {op} {dtype} x{count}"
                if op in got:
                    want = reference(N, dtype, count, op)
                    check(close(got[op], want, dtype), f"{what}: {got[op][:4]} vs {want[:4]}")
                else:
                    call = lambda a, op=op: hvd.allreduce(a, op=OP_OF[op])  # noqa: E731
                    expect_refusal((lambda: tf.function(call)(x)) if mode == "graph"
                                   else (lambda: call(x)), dtype, what)
            check(np.array_equal(got["broadcast"], everyone[N - 1]),
                  f"{mode} broadcast {dtype} x{count}")
            check(np.array_equal(got["allgather"], np.concatenate(everyone)),
                  f"{mode} allgather {dtype} x{count}")
            check(np.array_equal(got["alltoall"], np.concatenate(everyone)),
                  f"{mode} alltoall {dtype} x{count}")
            if "reducescatter" in got:
                full = reference(N, dtype, count, "sum")
                share = shares(N + 1, N)
                start = sum(share[:R])
                want = np.stack([full] * (N + 1))[start:start + share[R]]
                check(close(got["reducescatter"], want, dtype),
                      f"{mode} reducescatter {dtype} x{count}")

# First dimensions and splits that differ per rank, eagerly and in a graph (whose output
# shapes are found when it runs).
ragged = tf.range(R + 1, dtype=tf.float32) + 100 * R
splits = ragged_splits(R, N)
rows = tf.range(sum(splits), dtype=tf.int32) + 1000 * R
want_gather = np.concatenate([np.arange(r + 1) + 100 * r for r in range(N)])
want_rows = ragged_alltoall_want(R, N)
for mode, wrap in (("eager", lambda f: f), ("graph", tf.function)):
    got = wrap(lambda a: hvd.allgather(a))(ragged).numpy()
    check(np.array_equal(got, want_gather), f"{mode} ragged allgather: {got}")
    got, received = wrap(lambda a: hvd.alltoall(a, splits=splits))(rows)
    check(np.array_equal(got.numpy(), want_rows), f"{mode} alltoall with splits: {got}")
    check(list(received.numpy()) == [ragged_splits(q, N)[R] for q in range(N)],
          f"{mode} alltoall received splits {received}")

# Scales and a grouped call (one negotiation, fused) of mixed dtypes; Compression.fp16.
a, b = tf.ones(5, tf.float32), tf.fill([3], tf.constant(2.0, tf.float64))
ga, gb = tf.function(lambda p, q: hvd.grouped_allreduce([p, q], op=hvd.Sum, prescale_factor=0.5,
                                                       postscale_factor=3.0))(a, b)
check(np.allclose(ga.numpy(), 1.5 * N) and np.allclose(gb.numpy(), 3.0 * N),
      "grouped allreduce with scales")
half = hvd.allreduce(tf.fill([4], 0.25 * (R + 1)), op=hvd.Sum, compression=hvd.Compression.fp16)
check(half.dtype == tf.float32 and np.allclose(half.numpy(), 0.25 * N * (N + 1) / 2),
      f"fp16 compression: {half}")
# A sparse gradient (tf.IndexedSlices) is gathered, its values averaged.
sparse = tf.IndexedSlices(tf.fill([1, 2], float(R)), tf.constant([R]), tf.constant([N, 2]))
dense = tf.convert_to_tensor(hvd.allreduce(sparse, op=hvd.Average)).numpy()
check(np.allclose(dense, np.arange(N)[:, None] / N * np.ones((N, 2))), f"sparse: {dense}")
# Variables and objects from the root.
v = tf.Variable(tf.fill([2, 2], float(R)))
hvd.broadcast_variables([v], root_rank=0)
check(float(tf.reduce_sum(v)) == 0.0, "broadcast_variables")
check(hvd.broadcast_object({"rank": R}, root_rank=N - 1) == {"rank": N - 1}, "broadcast_object")
check(hvd.allgather_object(R * 10) == [r * 10 for r in range(N)], "allgather_object")
# A process set of every rank but the last (the whole job at np 1): members reduce among
# themselves, the others skip it.
subset = hvd.add_process_set(list(range(max(N - 1, 1))))
if subset.included():
    got = hvd.allreduce(tf.constant([1.0]), op=hvd.Sum, process_set=subset).numpy()
    check(got[0] == max(N - 1, 1), f"process set allreduce: {got}")
hvd.remove_process_set(subset)
check(int(hvd.join()) in range(N), "join")
finish("collectives_test")
