"""hoop.torch.elastic: horovod.torch.elastic on hoop's elastic jobs.

    import hoop.torch as hvd
    hvd.init()
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    train(state)

Launch with hooprun --host-discovery-script (README, "Elastic training"). When a rank is
lost, the others' next collective raises a HoopError (HorovodInternalError) that run() catches:
it restores the last commit, moves to the job's next round (shutdown() and init() with the new
ranks), broadcasts the state from the new rank 0 and calls the function again. When hosts are
added, commit() raises HostsUpdatedInterrupt on every rank at once and run() moves on the same
way, without the restore. Names and behaviour follow horovod.torch.elastic 0.28.
"""

import copy
import functools
import math
import random

import torch

from hoop import _hoop
from hoop._hoop import HoopError
from hoop.torch import basics
from hoop.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by State.commit() and State.check_host_updates() on every rank when the job's
    hosts changed; run() moves the job to its new round. skip_sync: keep the state as it is
    instead of broadcasting it from rank 0 (hoop always broadcasts: new workers need it)."""

    def __init__(self, skip_sync=False):
        """The interruption; skip_sync as the class says."""
        super().__init__("the job's hosts changed")
        ## Whether run() may keep the state instead of broadcasting it (hoop broadcasts).
        self.skip_sync = skip_sync


class State:
    """The state an elastic job carries through resets: save() and restore() keep and put back a
    copy, sync() copies rank 0's to every rank; commit() saves and checks for new hosts."""

    def __init__(self, bcast_object=broadcast_object, get_rank=basics.rank):
        """A state that broadcasts objects with `bcast_object` and reads this rank with
        `get_rank`."""
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions run after every reset, in the new round (e.g. to rescale the learning
        rate by the new size)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """Runs the reset callbacks in the order they were registered."""
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Horovod's notification hook; hoop learns of new rounds in check_host_updates()."""

    def commit(self):
        """Saves the state (what a lost rank rolls back to) and checks for new hosts. A
        collective: every rank commits at the same points."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when hooprun published a new round."""
        if _hoop.elastic_hosts_updated():
            raise HostsUpdatedInterrupt(False)

    def save(self):
        """Keeps a copy of the state (a subclass's part)."""
        raise NotImplementedError

    def restore(self):
        """Puts the last saved copy back (a subclass's part)."""
        raise NotImplementedError

    def sync(self):
        """Copies rank 0's state to every rank (a subclass's part). A collective."""
        raise NotImplementedError


class ObjectState(State):
    """State of picklable attributes, given as keyword arguments: state.epoch, state.batch."""

    def __init__(self, bcast_object=broadcast_object, get_rank=basics.rank, **kwargs):
        """A state of the attributes `kwargs` names, with their initial values."""
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        """Keeps a deep copy of every attribute."""
        self._saved_state = {attr: copy.deepcopy(getattr(self, attr))
                             for attr in self._saved_state}

    def restore(self):
        """Sets every attribute back to its saved copy."""
        self._set_attrs()

    def sync(self):
        """Sets every attribute to rank 0's saved copy. A collective."""
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, copy.deepcopy(value))


class _StateDictHandler:
    """Keeps a deep copy of an object's state_dict(); `broadcast` copies rank 0's to the others."""

    def __init__(self, value, broadcast):
        self.value = value
        self._broadcast = broadcast
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        self._broadcast(self.value)


class TorchState(ObjectState):
    """State of a model, an optimizer, an ElasticSampler and any picklable attributes:

        state = TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)

    Modules and optimizers are saved as deep copies of their state_dict() and broadcast with
    broadcast_parameters and broadcast_optimizer_state; samplers as their state_dict()."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        """A state of `model`, `optimizer` and the objects and values `kwargs` names."""
        kwargs.update(model=model, optimizer=optimizer)
        self._handlers = {}
        plain = {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is None:
                plain[name] = value
            else:
                self._handlers[name] = handler
                setattr(self, name, value)
        super().__init__(bcast_object=broadcast_object, get_rank=basics.rank, **plain)
        samplers = [h.value for h in self._handlers.values()
                    if isinstance(h.value, ElasticSampler)]
        self.register_reset_callbacks([s.reset for s in samplers])

    def save(self):
        """Keeps a copy of every state_dict() and attribute."""
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        """Loads the saved state_dict()s and sets the attributes back."""
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        """Broadcasts the model, optimizer, samplers and attributes from rank 0. A collective."""
        for handler in self._handlers.values():
            handler.sync()
        super().sync()


def _handler_for(value):
    if isinstance(value, torch.nn.Module):
        return _StateDictHandler(
            value, lambda model: broadcast_parameters(model.state_dict(), root_rank=0))
    if isinstance(value, torch.optim.Optimizer):
        return _StateDictHandler(
            value, lambda optimizer: broadcast_optimizer_state(optimizer, root_rank=0))
    if isinstance(value, ElasticSampler):
        return _StateDictHandler(
            value, lambda sampler: sampler.load_state_dict(
                broadcast_object(sampler.state_dict(), root_rank=0)))
    return None


class ElasticSampler(torch.utils.data.Sampler):
    """Shards a dataset over the ranks of the current round and skips what the job already
    processed this epoch, so that a job that changed size goes on with the rest of the epoch.

    Call set_epoch(epoch) at each epoch's start and record_batch(batch_idx, batch_size) after
    each batch; TorchState saves, restores and broadcasts its position and calls reset() after
    each reset, with the new rank and size."""

    def __init__(self, dataset, shuffle=True, seed=0):
        """A sampler of `dataset`, in an order drawn from seed + epoch with `shuffle`."""
        ## The dataset whose indices it yields.
        self.dataset = dataset
        ## Whether each epoch draws its own order.
        self.shuffle = shuffle
        ## The seed of the order, with the epoch.
        self.seed = seed
        ## The current epoch.
        self.epoch = 0
        ## Examples of the epoch that the job has processed, over all ranks.
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch`, with nothing processed yet."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Counts one batch of batch_size examples on every rank as processed."""
        self.processed_num += batch_size * self.num_replicas

    def record_indices(self, indices):
        """Counts these indices (of this rank's batch) as processed, on every rank alike."""
        self.processed_num += len(indices) * self.num_replicas

    def load_state_dict(self, state_dict):
        """Moves to the epoch and position of a state_dict()."""
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def state_dict(self):
        """The epoch and the number of examples processed in it."""
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def reset(self):
        """Shards what is left of the epoch over the ranks of the current round."""
        ## The number of ranks sharing the dataset.
        self.num_replicas = basics.size()
        ## This rank.
        self.rank = basics.rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        ## The epoch's indices not processed yet, in order.
        self.remaining_indices = order[self.processed_num:]
        ## The number of indices each rank gets from them.
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        ## num_samples times num_replicas: the remaining indices, padded.
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        """This rank's share of the remaining indices."""
        indices = list(self.remaining_indices)
        # Padded with the first ones so that every rank gets as many.
        indices += indices[:self.total_size - len(indices)]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        """The number of indices this rank gets, num_samples."""
        return self.num_samples


def _reset():
    basics.shutdown()
    basics.init()


def run(func):
    """Decorates func(state, *args, **kwargs) to run through resets; see the module's
    docstring. Outside an elastic job, and for failures a reset cannot cure (bad arguments,
    ranks that disagree), the HoopError propagates."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not basics.is_initialized():
            basics.init()
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt:
                # New workers need the state: hoop always broadcasts it.
                skip_sync = False
            except HoopError as e:
                if not _hoop.elastic_enabled() or not getattr(e, "recoverable", False):
                    raise
                # When no worker of the round ends (a peer stopped or hung), the reports are how
                # the driver learns the round is over, as in C++ elastic::run.
                _hoop.elastic_report_failure(e.code, e.message)
                state.restore()
                skip_sync = False
            _reset()
            state.on_reset()

    return wrapper
