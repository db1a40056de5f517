"""LeNet-5 on Fashion-MNIST with Keras 3 and hoop.keras, data-parallel.

    PYTHONPATH=build/python build/bin/hooprun -np 2 .frameworks/venv/bin/python \\
        examples/keras_fashion_mnist.py --epochs 1

(.frameworks/venv: scripts/install-frameworks.) Keras runs on its TensorFlow backend, or on the
one KERAS_BACKEND names (jax works too). Each rank trains on its shard of the training set
(every size-th example from its rank on); BroadcastGlobalVariablesCallback starts every rank
from rank 0's weights; hoop.keras.DistributedOptimizer averages the gradients inside the
compiled train step (one fused allreduce per step); LearningRateWarmupCallback ramps Adam's
rate, scaled by the ranks, over the first epoch; MetricAverageCallback averages the epoch's
metrics over the ranks. Rank 0 prints each epoch's loss, test accuracy (over the ranks' shares
of the test set) and throughput in samples/s.

The data are the gzipped IDX files of Fashion-MNIST, read from $HOOP_DATA_DIR or
/usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist).
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import fashion_mnist  # noqa: E402 -- examples/fashion_mnist.py, beside this script
import hoop.keras as hvd  # noqa: E402


def lenet5():
    """LeNet-5: conv 5x5x6 (padded), pool, conv 5x5x16, pool, dense 120, 84, 10."""
    layers = keras.layers
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(6, 5, padding="same", activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(16, 5, activation="relu"), layers.MaxPooling2D(),
        layers.Flatten(), layers.Dense(120, activation="relu"),
        layers.Dense(84, activation="relu"), layers.Dense(10),
    ])


class Throughput(keras.callbacks.Callback):
    """Each epoch's training time, kept for the samples/s line."""

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        logs["seconds"] = time.perf_counter() - self.start


def main():
    args = fashion_mnist.example_parser(__doc__.splitlines()[0]).parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    keras.utils.set_random_seed(args.seed + rank)  # rank 0's weights win the broadcast
    x_train, y_train = fashion_mnist.load("train", args.data_dir)
    x_test, y_test = fashion_mnist.load("t10k", args.data_dir)
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
    mine = np.arange(rank, len(y_train) - len(y_train) % size, size)
    test = np.arange(rank, len(y_test), size)

    model = lenet5()
    lr = args.lr * size
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(lr)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    steps = len(mine) // args.batch_size
    timer = Throughput()
    history = model.fit(
        x_train[mine, ..., None], y_train[mine], batch_size=args.batch_size, epochs=args.epochs,
        steps_per_epoch=steps, shuffle=True, verbose=0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), timer,
                   hvd.callbacks.MetricAverageCallback(),
                   hvd.callbacks.LearningRateWarmupCallback(lr, warmup_epochs=1,
                                                            steps_per_epoch=steps)])
    _, accuracy = model.evaluate(x_test[test, ..., None], y_test[test], batch_size=1000,
                                 verbose=0)
    hits = hvd.allreduce(np.float64(accuracy * len(test)), op=hvd.Sum, name="test.hits")
    if rank == 0:
        for epoch in range(args.epochs):
            seconds = history.history["seconds"][epoch]  # averaged over the ranks
            print(f"epoch {epoch + 1}: loss {history.history['loss'][epoch]:.4f}, "
                  f"{steps * args.batch_size * size / seconds:.0f} samples/s over {size} ranks",
                  flush=True)
        print(f"test accuracy {100.0 * float(hits) / len(y_test):.1f} %", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
