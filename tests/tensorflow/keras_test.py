"""hoop.keras on the Keras backend KERAS_BACKEND names (tensorflow, or jax: beyond Horovod).

- model.fit with DistributedOptimizer (SGD, Adam), BroadcastGlobalVariablesCallback and
  MetricAverageCallback, each rank on its share of every batch and starting from its own
  random weights, ends with the weights of one process (without hoop) trained on the whole
  batches from rank 0's start, within float32 rounding; the averaged loss is the same on
  every rank.
- LearningRateWarmupCallback and LearningRateScheduleCallback set the learning rates Horovod's
  formulas give.
- load_model restores a saved model with a DistributedOptimizer, which trains on.
Prints "OK keras_test <backend> at np N".
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import harness  # noqa: E402
import hoop.keras as hvd  # noqa: E402
from harness import check, finish  # noqa: E402

harness.use(hvd)
hvd.init()
R, N = hvd.rank(), hvd.size()
BACKEND = keras.backend.backend()
BATCH, STEPS, FEATURES, EPOCHS = 8, 4, 5, 2
rng = np.random.default_rng(11)
x_all = rng.normal(size=(STEPS * BATCH * N, FEATURES)).astype(np.float32)
y_all = rng.normal(size=(STEPS * BATCH * N, 1)).astype(np.float32)
# Rank R's share of batch b: rows R*BATCH..(R+1)*BATCH of that batch.
mine = np.concatenate([np.arange(b * BATCH * N + R * BATCH, b * BATCH * N + (R + 1) * BATCH)
                       for b in range(STEPS)])


def make_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(16, activation="tanh"),
                             keras.layers.Dense(1)])


for name, make in (("sgd", lambda: keras.optimizers.SGD(0.1, momentum=0.5)),
                   ("adam", lambda: keras.optimizers.Adam(0.01))):
    model = make_model(R)
    model.compile(optimizer=hvd.DistributedOptimizer(make()), loss="mse")
    history = model.fit(x_all[mine], y_all[mine], batch_size=BATCH, epochs=EPOCHS,
                        shuffle=False, verbose=0,
                        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                                   hvd.callbacks.MetricAverageCallback()])
    whole = make_model(0)
    whole.compile(optimizer=make(), loss="mse")
    whole.fit(x_all, y_all, batch_size=BATCH * N, epochs=EPOCHS, shuffle=False, verbose=0)
    for k, (a, b) in enumerate(zip(model.get_weights(), whole.get_weights())):
        check(np.allclose(a, b, rtol=1e-5, atol=1e-6),
              f"{BACKEND} {name}: weight {k} differs by {np.max(np.abs(a - b))} from one process "
              "on the whole batches")
    losses = hvd.allgather(np.asarray([history.history["loss"][-1]]))
    check(np.all(losses == losses[0]), f"{BACKEND} {name}: averaged losses differ: {losses}")

# Learning rates: the warmup from lr / N to lr over 2 epochs, batch by batch; then a staircase
# schedule halving it every epoch.
model = make_model(R)
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
history = model.fit(x_all[mine], y_all[mine], batch_size=BATCH, epochs=2, shuffle=False,
                    verbose=0, callbacks=[hvd.callbacks.LearningRateWarmupCallback(
                        0.1, warmup_epochs=2, steps_per_epoch=STEPS)])
last = 1 + (STEPS - 1) / STEPS  # the fractional epoch of the last batch of epoch 1
want = [0.1 / N * (e * (N - 1) / 2 + 1) for e in ((STEPS - 1) / STEPS, last)]
want[-1] = 0.1  # the warmup ends at the full rate
check(np.allclose(history.history["lr"], want, rtol=1e-5), f"warmup: {history.history['lr']} "
      f"vs {want}")
history = model.fit(x_all[mine], y_all[mine], batch_size=BATCH, epochs=3, shuffle=False,
                    verbose=0, callbacks=[hvd.callbacks.LearningRateScheduleCallback(
                        0.1, lambda e: 0.5 ** e, start_epoch=1)])
check(np.allclose(history.history["lr"][1:], [0.05, 0.025], rtol=1e-5),
      f"schedule: {history.history['lr']}")

# A saved model comes back with a DistributedOptimizer, which still averages over the ranks.
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, f"model_{R}.keras")
    model.save(path)
    restored = hvd.load_model(path)
check(hasattr(restored.optimizer, "_hoop_settings"), "load_model: optimizer not distributed")
before = [w.copy() for w in restored.get_weights()]
restored.fit(x_all[mine], y_all[mine], batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
             callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
after = hvd.allgather(np.concatenate([w.ravel() for w in restored.get_weights()])[None])
check(np.all(after == after[0]) and not np.array_equal(before[0], restored.get_weights()[0]),
      "load_model: the restored model does not train in step on every rank")
harness_name = f"keras_test {BACKEND}"
finish(harness_name)
sys.exit(0)
