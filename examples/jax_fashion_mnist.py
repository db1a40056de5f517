"""LeNet-5 on Fashion-MNIST with JAX, optax and hoop.jax, data-parallel.

    PYTHONPATH=build/python build/bin/hooprun -np 2 .frameworks/venv/bin/python \\
        examples/jax_fashion_mnist.py --epochs 1

(.frameworks/venv: scripts/install-frameworks.) Each rank trains on its shard of the training
set (one permutation per epoch shared by all ranks, every size-th example from its rank on);
rank 0's initial parameters are broadcast; hoop.jax.DistributedOptimizer averages the gradients
inside the jitted step (one fused allreduce per step). Rank 0 prints each epoch's loss, test
accuracy (averaged over the ranks' shares of the test set) and throughput in samples/s.

The data are the gzipped IDX files of Fashion-MNIST, read from $HOOP_DATA_DIR or
/usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist).
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import fashion_mnist  # examples/fashion_mnist.py, beside this script
import hoop.jax as hvd


def init_lenet5(key):
    """LeNet-5: conv 5x5x6 (padded), pool, conv 5x5x16, pool, dense 120, 84, 10."""
    shapes = {"c1": (5, 5, 1, 6), "c2": (5, 5, 6, 16), "f1": (16 * 5 * 5, 120), "f2": (120, 84),
              "f3": (84, 10)}
    params = {}
    for (name, shape), k in zip(shapes.items(), jax.random.split(key, len(shapes))):
        fan_in = int(np.prod(shape[:-1]))
        params[name] = {"w": jax.random.normal(k, shape) * np.sqrt(2.0 / fan_in),
                        "b": jnp.zeros(shape[-1])}
    return params


def lenet5(params, x):
    def conv(x, p, padding):
        y = jax.lax.conv_general_dilated(x, p["w"], (1, 1), padding,
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y + p["b"])

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    x = pool(conv(x, params["c1"], "SAME"))
    x = pool(conv(x, params["c2"], "VALID"))
    x = x.reshape(x.shape[0], -1)
    x = jax.nn.relu(x @ params["f1"]["w"] + params["f1"]["b"])
    x = jax.nn.relu(x @ params["f2"]["w"] + params["f2"]["b"])
    return x @ params["f3"]["w"] + params["f3"]["b"]


def loss_fn(params, x, y):
    logits = lenet5(params, x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def main():
    args = fashion_mnist.example_parser(__doc__.splitlines()[0]).parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    x_train, y_train = fashion_mnist.load("train", args.data_dir)
    x_test, y_test = fashion_mnist.load("t10k", args.data_dir)
    x_train, x_test = x_train[..., None], x_test[..., None]  # NHWC
    y_train, y_test = y_train.astype(np.int32), y_test.astype(np.int32)
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]

    params = hvd.broadcast_parameters(init_lenet5(jax.random.PRNGKey(args.seed)), root_rank=0)
    tx = hvd.DistributedOptimizer(optax.adam(args.lr * size))
    state = tx.init(params)

    @jax.jit
    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    @jax.jit
    def correct(params, x, y):
        return jnp.sum(jnp.argmax(lenet5(params, x), axis=1) == y)

    per_rank = len(y_train) // size
    steps = per_rank // args.batch_size
    for epoch in range(1, args.epochs + 1):
        order = np.random.default_rng(args.seed + epoch).permutation(len(y_train))
        mine = order[rank:per_rank * size:size]
        start, total = time.perf_counter(), 0.0
        for s in range(steps):
            idx = mine[s * args.batch_size:(s + 1) * args.batch_size]
            params, state, loss = step(params, state, x_train[idx], y_train[idx])
            total += float(loss)
        elapsed = time.perf_counter() - start
        # Accuracy over the ranks' shares of the test set, summed with hoop.
        test = np.arange(rank, len(y_test), size)
        hits = sum(int(correct(params, x_test[test[i:i + 1000]], y_test[test[i:i + 1000]]))
                   for i in range(0, len(test), 1000))
        hits = float(hvd.allreduce(jnp.asarray(float(hits)), op=hvd.Sum, name="test.hits"))
        loss = float(hvd.allreduce(jnp.asarray(total / max(steps, 1)), name="train.loss"))
        slowest = float(hvd.allreduce(jnp.asarray(elapsed), op=hvd.Max, name="epoch.time"))
        if rank == 0:
            accuracy = 100.0 * hits / len(y_test)
            print(f"epoch {epoch}: loss {loss:.4f}, test accuracy {accuracy:.1f} %, "
                  f"{steps * args.batch_size * size / slowest:.0f} samples/s over {size} ranks",
                  flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
