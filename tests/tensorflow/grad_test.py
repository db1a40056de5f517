"""Gradients through hoop.tensorflow's collectives, and data-parallel training.

- tf.GradientTape through allreduce (Sum, Average, with scales), allgather, broadcast,
  reducescatter and alltoall, eagerly and inside tf.function, against the analytic gradient of
  the job's objective (the sum over ranks of each rank's loss, as in Horovod); an op without a
  gradient (Min) is refused naming it.
- A 2-layer network trained for a few steps with DistributedGradientTape (SGD and Adam, inside
  tf.function) and with the TF1 DistributedOptimizer, each rank on its share of every batch,
  ends with the parameters of one process trained on the whole batches (computed here without
  hoop), within float32 rounding.
Prints "OK grad_test at np N".
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import harness  # noqa: E402
import hoop.tensorflow as hvd  # noqa: E402
from harness import check, finish  # noqa: E402
from reference import (BATCH, FEATURES, STEPS, expect_min_refused,  # noqa: E402
                       regression_batches)

harness.use(hvd)
hvd.init()
R, N = hvd.rank(), hvd.size()


def weights(rank, n):
    return tf.constant(np.random.default_rng([7, rank]).uniform(-1, 1, n), tf.float32)


def grad_of(fn, x, graph):
    def g(a):
        with tf.GradientTape() as tape:
            tape.watch(a)
            y = fn(a)
        return tape.gradient(y, a)
    return (tf.function(g) if graph else g)(x).numpy()


x = tf.range(4, dtype=tf.float32) + R
all_w = sum(weights(r, 4).numpy() for r in range(N))
for mode in ("eager", "graph"):
    graph = mode == "graph"
    g = grad_of(lambda a: tf.reduce_sum(hvd.allreduce(a, op=hvd.Sum) * weights(R, 4)), x, graph)
    check(np.allclose(g, all_w, rtol=1e-6), f"{mode} grad allreduce sum: {g} vs {all_w}")
    g = grad_of(lambda a: tf.reduce_sum(hvd.allreduce(a, op=hvd.Average) * weights(R, 4)), x,
                graph)
    check(np.allclose(g, all_w / N, rtol=1e-6), f"{mode} grad allreduce average: {g}")
    g = grad_of(lambda a: tf.reduce_sum(hvd.allreduce(a, op=hvd.Sum, prescale_factor=2.0,
                                                      postscale_factor=0.5) * weights(R, 4)),
                x, graph)
    check(np.allclose(g, all_w, rtol=1e-6), f"{mode} grad allreduce with scales: {g}")
    # allgather: rank r's loss weighs the gathered rows with weights(r, 4 N).
    g = grad_of(lambda a: tf.reduce_sum(hvd.allgather(a) * weights(R, 4 * N)), x, graph)
    want = sum(weights(r, 4 * N).numpy() for r in range(N))[4 * R:4 * R + 4]
    check(np.allclose(g, want, rtol=1e-6), f"{mode} grad allgather: {g} vs {want}")
    root = N - 1
    g = grad_of(lambda a: tf.reduce_sum(hvd.broadcast(a, root_rank=root) * weights(R, 4)), x,
                graph)
    want = all_w if R == root else np.zeros(4)
    check(np.allclose(g, want, rtol=1e-6), f"{mode} grad broadcast: {g} vs {want}")
    # reducescatter of N rows of 4: rank r's loss weighs its row with weights(r, 4); every
    # rank's input row q gets rank q's weights, divided by N for Average.
    rows = tf.reshape(tf.tile(x, [N]), [N, 4])
    g = grad_of(lambda a: tf.reduce_sum(hvd.reducescatter(a, op=hvd.Average) * weights(R, 4)),
                rows, graph)
    want = np.stack([weights(q, 4).numpy() / N for q in range(N)])
    check(np.allclose(g, want, rtol=1e-6), f"{mode} grad reducescatter: {g} vs {want}")
    # alltoall: row q goes to rank q, whose loss weighs the row from rank R with weights(q, 4).
    g = grad_of(lambda a: tf.reduce_sum(
        hvd.alltoall(a)[0] * tf.reshape(tf.tile(weights(R, 4), [N]), [N, 4])), rows, graph)
    want = np.stack([weights(q, 4).numpy() for q in range(N)])
    check(np.allclose(g, want, rtol=1e-6), f"{mode} grad alltoall: {g} vs {want}")
expect_min_refused(lambda: grad_of(lambda a: tf.reduce_sum(hvd.allreduce(a, op=hvd.Min)), x, False),
                   hvd.HoopValueError, check)

# Training: every rank holds the same initial parameters (broadcast from rank 0, which drew
# them); batch b of the whole data set is split into N shares, one per rank.
data, labels = regression_batches(N)


def init_params(seed):
    r = np.random.default_rng(seed)
    return [tf.Variable(r.normal(size=(FEATURES, 16)).astype(np.float32) * 0.3),
            tf.Variable(np.zeros(16, np.float32)),
            tf.Variable(r.normal(size=(16, 1)).astype(np.float32) * 0.3),
            tf.Variable(np.zeros(1, np.float32))]


def loss(p, xb, yb):
    h = tf.tanh(xb @ p[0] + p[1])
    return tf.reduce_mean((h @ p[2] + p[3] - yb) ** 2)


def train_tape(opt, params, share, distributed):
    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            value = loss(params, xb, yb)
        if distributed:
            tape = hvd.DistributedGradientTape(tape)
        opt.apply_gradients(zip(tape.gradient(value, params), params))

    for b in range(STEPS):
        step(share(data[b]), share(labels[b]))
    return [p.numpy() for p in params]


def train_v1(params, share, distributed):
    opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    if distributed:
        opt = hvd.DistributedOptimizer(opt)
    for b in range(STEPS):
        xb, yb = share(data[b]), share(labels[b])
        opt.minimize(lambda: loss(params, xb, yb), var_list=params)
    return [p.numpy() for p in params]


def mine(a):
    return a[R * BATCH:(R + 1) * BATCH]


def start():
    params = init_params(R)
    hvd.broadcast_variables(params, root_rank=0)
    return params


runs = {
    "sgd": lambda d: train_tape(keras.optimizers.SGD(0.1), start() if d else init_params(0),
                                mine if d else (lambda a: a), d),
    "adam": lambda d: train_tape(keras.optimizers.Adam(0.01), start() if d else init_params(0),
                                 mine if d else (lambda a: a), d),
    "v1 sgd": lambda d: train_v1(start() if d else init_params(0), mine if d else (lambda a: a),
                                 d),
}
for name, run in runs.items():
    distributed, whole = run(True), run(False)
    for k, (a, b) in enumerate(zip(distributed, whole)):
        check(np.allclose(a, b, rtol=1e-5, atol=1e-6),
              f"{name}: parameter {k} differs by {np.max(np.abs(a - b))} from one process on "
              "the whole batches")

finish("grad_test")
