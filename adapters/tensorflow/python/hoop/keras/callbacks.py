"""hoop.keras's callbacks, Horovod's (horovod.tensorflow.keras.callbacks) for Keras 3 on any
backend: they run between steps and exchange host copies of the values."""

import keras

from hoop import _hoop
from hoop._ops import Average
from hoop._process_sets import global_process_set, root_in_set, set_id
from hoop.keras import _backend


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Starts every rank from the root rank's model and optimizer state: broadcasts them when
    training begins (the optimizer's, if it builds only in the first step, after it)."""

    def __init__(self, root_rank, device="", process_set=global_process_set):
        """Broadcasts from `root_rank` (a global rank) over `process_set`; `device` is accepted
        for Horovod compatibility and unused."""
        super().__init__()
        del device
        ## The rank whose state every rank starts from.
        self.root_rank = root_rank
        ## The ranks that take part.
        self.process_set = process_set
        self._model_done = False
        self._optimizer_done = False

    def _broadcast(self):
        root = root_in_set(self.process_set, self.root_rank)
        ps = set_id(self.process_set)
        if not self._model_done:
            _backend.broadcast_variables(self.model.variables, root, "keras.model", ps)
            self._model_done = True
        optimizer = getattr(self.model, "optimizer", None)
        if not self._optimizer_done and optimizer is not None and optimizer.built:
            _backend.broadcast_variables(optimizer.variables, root, "keras.optimizer", ps)
            self._optimizer_done = True

    def on_train_begin(self, logs=None):
        """Broadcasts the model's variables (and the optimizer's, once built)."""
        self._broadcast()

    def on_train_batch_end(self, batch, logs=None):
        """Broadcasts the optimizer's variables after the step that built them."""
        if not self._optimizer_done:
            self._broadcast()


class MetricAverageCallback(keras.callbacks.Callback):
    """Replaces each epoch's metrics in `logs` by their average over the ranks, so that the
    callbacks after it (checkpoints, early stopping, learning-rate plateaus) see the same
    numbers everywhere. Put it before them."""

    def __init__(self, device="", process_set=global_process_set):
        """Averages over `process_set`; `device` is accepted for Horovod compatibility and
        unused."""
        super().__init__()
        del device
        ## The ranks the metrics are averaged over.
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        """Replaces the numbers in `logs` by their average over the ranks."""
        if not logs:
            return
        keys = sorted(k for k, v in logs.items() if _is_number(v))
        averaged = _backend.allreduce_arrays([float(logs[k]) for k in keys],
                                             f"keras.metrics.{epoch}", Average,
                                             set_id(self.process_set))
        for k, a in zip(keys, averaged):
            logs[k] = float(a)


def _is_number(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the optimizer's learning rate to initial_lr * multiplier from start_epoch up to
    end_epoch: `multiplier` is a number or a function of the epoch, a whole number with
    staircase, else fractional, updated every batch (steps_per_epoch: the fit's steps if not
    given). momentum_correction is accepted for Horovod compatibility: a Keras 3 optimizer's
    momentum is fixed when its step is compiled, so hoop does not rescale it."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        """The schedule the class describes; end_epoch None: to the end of training."""
        super().__init__()
        ## The learning rate the multiplier scales.
        self.initial_lr = initial_lr
        ## The multiplier as a function of the (fractional) epoch.
        self.multiplier = multiplier if callable(multiplier) else (lambda _epoch: multiplier)
        ## The first epoch of the schedule.
        self.start_epoch = start_epoch
        ## The epoch the schedule stops before; None: none.
        self.end_epoch = end_epoch
        ## Whether the rate changes once per epoch (True) or every batch.
        self.staircase = staircase
        ## Accepted for Horovod compatibility; unused.
        self.momentum_correction = momentum_correction
        ## Batches per epoch, for a schedule without staircase; None: the fit's steps.
        self.steps_per_epoch = steps_per_epoch
        self._epoch = 0

    def _active(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _set(self, epoch):
        self.model.optimizer.learning_rate = self.initial_lr * self.multiplier(epoch)

    def on_train_begin(self, logs=None):
        """Takes steps_per_epoch from the fit when it was not given."""
        if self.steps_per_epoch is None:
            self.steps_per_epoch = (self.params or {}).get("steps")

    def on_epoch_begin(self, epoch, logs=None):
        """Sets the epoch's learning rate (with staircase)."""
        self._epoch = epoch
        if self._active(epoch) and self.staircase:
            self._set(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        """Sets the batch's learning rate (without staircase)."""
        if self.staircase or not self._active(self._epoch):
            return
        if not self.steps_per_epoch:
            raise ValueError("hoop.keras: a learning-rate schedule without staircase needs "
                             "steps_per_epoch (the fit gave none)")
        self._set(self._epoch + batch / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        """Reports the learning rate in `logs` as "lr"."""
        if logs is not None:
            logs["lr"] = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate from initial_lr / size to initial_lr over warmup_epochs, batch
    by batch (Goyal et al., "Accurate, Large Minibatch SGD"), as Horovod's does."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        """The warmup the class describes; verbose: rank 0 prints when it ends."""

        def multiplier(epoch):
            n = _hoop.size()
            return 1.0 / n * (epoch * (n - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        ## The epochs the warmup lasts.
        self.warmup_epochs = warmup_epochs
        ## Whether rank 0 prints when the warmup ends.
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        """Sets the learning rate to initial_lr at the warmup's last epoch, then reports it."""
        if epoch == self.warmup_epochs - 1:
            self.model.optimizer.learning_rate = self.initial_lr
            if self.verbose and _hoop.rank() == 0:
                print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to "
                      f"{self.initial_lr:g}.")
        super().on_epoch_end(epoch, logs)
