"""hoop.jax's per-call costs and training throughput, the cases of bench/torch_horovod_bench.py.

    PYTHONPATH=build/python build/bin/hooprun -np 2 .frameworks/venv/bin/python bench/jax_bench.py

Rank 0 prints one line per case ("<case> <value>"), each a median over its repetitions, each
repetition after a barrier (an allreduce of one float):
  lone_us       one allreduce of a 2-float array, eagerly;
  lone_jit_us   the same inside a jitted function (its dispatch included);
  step_us       400 arrays of 4 KiB averaged in one jitted call of allreduce_gradients (one
                grouped allreduce: negotiated and fused as one);
  large_us      one 64 MiB allreduce, eagerly;
  samples/s     training throughput of examples/jax_fashion_mnist.py's LeNet-5 (Adam through
                DistributedOptimizer, --batch-size per rank, --steps timed steps).
"""

import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import hoop.jax as hvd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from call_timing import parse_args, report_cases  # noqa: E402
import fashion_mnist  # noqa: E402
from jax_fashion_mnist import init_lenet5, loss_fn  # noqa: E402


def main():
    args = parse_args(__doc__.splitlines()[0])
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    one = jnp.zeros(1)

    def barrier():
        hvd.allreduce(one, op=hvd.Sum, name="bench.barrier")

    lone = jnp.ones(2)
    lone_jit = jax.jit(lambda a: hvd.allreduce(a, op=hvd.Sum, name="lone.jit"))
    grads = [jnp.ones(1024) for _ in range(400)]
    step = jax.jit(lambda g: hvd.allreduce_gradients(g, name="step"))
    large = jnp.ones(16 << 20)
    cases = [
        ("lone_us", lambda: hvd.allreduce(lone, op=hvd.Sum, name="lone"), args.lone_reps),
        ("lone_jit_us", lambda: lone_jit(lone), args.lone_reps),
        ("step_us", lambda: step(grads), args.step_reps),
        ("large_us", lambda: hvd.allreduce(large, op=hvd.Sum, name="large"), args.large_reps),
    ]
    report_cases(cases, lambda body: jax.block_until_ready(body()), barrier, rank)

    x, y = fashion_mnist.load("train", args.data_dir)
    x, y = x[..., None], y.astype(np.int32)
    params = hvd.broadcast_parameters(init_lenet5(jax.random.PRNGKey(0)), root_rank=0)
    tx = hvd.DistributedOptimizer(optax.adam(1e-3 * size))
    state = tx.init(params)

    @jax.jit
    def train_step(params, state, xb, yb):
        grads = jax.grad(loss_fn)(params, xb, yb)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    def batch(i):
        start = ((i * size + rank) * args.batch_size) % (len(y) - args.batch_size)
        return x[start:start + args.batch_size], y[start:start + args.batch_size]

    for i in range(args.warmup):
        params, state = train_step(params, state, *batch(i))
    jax.block_until_ready(params)
    barrier()
    begin = time.perf_counter()
    for i in range(args.steps):
        params, state = train_step(params, state, *batch(args.warmup + i))
    jax.block_until_ready(params)
    barrier()
    rate = args.steps * args.batch_size * size / (time.perf_counter() - begin)
    if rank == 0:
        print(f"samples/s {rate:.1f}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
