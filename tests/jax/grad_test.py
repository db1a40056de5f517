"""Gradients through hoop.jax's collectives, and data-parallel training with optax.

- jax.grad through allreduce (Sum, Average, with scales), allgather and broadcast, under jit and
  eagerly, against the analytic gradient of the job's objective (the sum over ranks of each
  rank's loss, as in Horovod); an op without a gradient (Min) is refused naming it.
- A 2-layer network trained for a few SGD and Adam steps with hoop.jax.DistributedOptimizer,
  each rank on its share of every batch, ends with the parameters of one process trained on
  the whole batches (computed here without hoop), within float32 rounding.
Prints "OK grad_test at np N".
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import harness
import hoop.jax as hvd
from harness import check, finish
from reference import BATCH, FEATURES, STEPS, expect_min_refused, regression_batches

harness.use(hvd)
hvd.init()
R, N = hvd.rank(), hvd.size()


def weights(rank, n):
    return jnp.asarray(np.random.default_rng([7, rank]).uniform(-1, 1, n), jnp.float32)


x = jnp.arange(4, dtype=jnp.float32) + R
all_w = sum(np.asarray(weights(r, 4)) for r in range(N))
for mode, wrap in (("eager", lambda f: f), ("jit", jax.jit)):
    g = wrap(jax.grad(lambda a: jnp.sum(hvd.allreduce(a, op=hvd.Sum) * weights(R, 4))))(x)
    check(np.allclose(g, all_w, rtol=1e-6), f"{mode} grad allreduce sum: {g} vs {all_w}")
    g = wrap(jax.grad(lambda a: jnp.sum(hvd.allreduce(a, op=hvd.Average) * weights(R, 4))))(x)
    check(np.allclose(g, all_w / N, rtol=1e-6), f"{mode} grad allreduce average")
    g = wrap(jax.grad(lambda a: jnp.sum(hvd.allreduce(a, op=hvd.Sum, prescale_factor=2.0,
                                                      postscale_factor=0.5) * weights(R, 4))))(x)
    check(np.allclose(g, all_w, rtol=1e-6), f"{mode} grad allreduce with scales")
    # allgather: rank r's loss weighs the gathered rows with weights(r, 4 N).
    g = wrap(jax.grad(lambda a: jnp.sum(hvd.allgather(a) * weights(R, 4 * N))))(x)
    want = sum(np.asarray(weights(r, 4 * N)) for r in range(N))[4 * R:4 * R + 4]
    check(np.allclose(g, want, rtol=1e-6), f"{mode} grad allgather: {g} vs {want}")
    root = N - 1
    g = wrap(jax.grad(lambda a: jnp.sum(hvd.broadcast(a, root_rank=root) * weights(R, 4))))(x)
    want = all_w if R == root else np.zeros(4)
    check(np.allclose(g, want, rtol=1e-6), f"{mode} grad broadcast: {g} vs {want}")
expect_min_refused(lambda: jax.grad(lambda a: jnp.sum(hvd.allreduce(a, op=hvd.Min)))(x),
                   hvd.HoopValueError, check)

# Training: every rank holds the same initial parameters (broadcast from rank 0, which drew
# them); batch b of the whole data set is split into N shares, one per rank.
data, labels = regression_batches(N)


def init_params(seed):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return {"w1": jax.random.normal(k1, (FEATURES, 16)) * 0.3, "b1": jnp.zeros(16),
            "w2": jax.random.normal(k2, (16, 1)) * 0.3, "b2": jnp.zeros(1)}


def loss(p, xb, yb):
    h = jnp.tanh(xb @ p["w1"] + p["b1"])
    return jnp.mean((h @ p["w2"] + p["b2"] - yb) ** 2)


def train(tx, params, share):
    state = tx.init(params)

    @jax.jit
    def step(p, s, xb, yb):
        grads = jax.grad(loss)(p, xb, yb)
        updates, s = tx.update(grads, s, p)
        return optax.apply_updates(p, updates), s

    for b in range(STEPS):
        xb, yb = share(data[b]), share(labels[b])
        params, state = step(params, state, xb, yb)
    return params


for name, make in (("sgd", lambda: optax.sgd(0.1)), ("adam", lambda: optax.adam(0.01))):
    start = hvd.broadcast_parameters(init_params(R), root_rank=0)
    mine = train(hvd.DistributedOptimizer(make(), name=f"grads.{name}"), start,
                 lambda a: a[R * BATCH:(R + 1) * BATCH])
    whole = train(make(), init_params(0), lambda a: a)
    for key in whole:
        diff = float(jnp.max(jnp.abs(mine[key] - whole[key])))
        check(np.allclose(mine[key], whole[key], rtol=1e-5, atol=1e-6),
              f"{name}: parameter {key} differs by {diff} from one process on the whole batches")

finish("grad_test")
