"""Helpers built on the collectives: broadcasting model and optimizer state, and moving
picklable Python objects between ranks (horovod.torch.functions)."""

import collections
import pickle

import torch

from hoop.torch import handles
from hoop.torch.basics import rank
from hoop.torch.mpi_ops import allgather_async, broadcast_, broadcast_async_, synchronize
from hoop.torch.process_sets import global_process_set, set_id


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrites tensors in place with root_rank's, e.g. model.state_dict() or
    model.named_parameters() before training so every rank starts alike.

    params: a dict name -> tensor (broadcast in sorted-name order), or an iterable of
    (name, tensor) pairs or of bare tensors (auto-named, so every rank must pass them in
    the same order).
    """
    if isinstance(params, dict):
        params = sorted(params.items())
    else:
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    started = [broadcast_async_(p, root_rank, name, process_set) for name, p in params]
    for handle in started:
        synchronize(handle)


def _pickled(obj):
    return torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)


def _unpickled(tensor):
    return pickle.loads(tensor.numpy().tobytes())


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's `obj` (any picklable object) on every rank of the set.

    The object travels pickled: its length first, then its bytes. Unnamed calls are numbered,
    so ranks need not pass objects of the same type (None on non-root ranks is fine).
    """
    name = handles.op_name("broadcast_object", name, set_id(process_set))
    if rank() == root_rank:
        payload = _pickled(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
        broadcast_(length, root_rank, f"{name}.sz", process_set)
    else:
        length = torch.zeros(1, dtype=torch.int64)
        broadcast_(length, root_rank, f"{name}.sz", process_set)
        payload = torch.empty(int(length[0]), dtype=torch.uint8)
    broadcast_(payload, root_rank, f"{name}.t", process_set)
    return obj if rank() == root_rank else _unpickled(payload)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj` (picklable), in the set's rank order."""
    name = handles.op_name("allgather_object", name, set_id(process_set))
    payload = _pickled(obj)
    lengths_handle = allgather_async(torch.tensor([payload.numel()], dtype=torch.int64),
                                     f"{name}.sz", process_set)
    bytes_handle = allgather_async(payload, f"{name}.t", process_set)
    lengths = synchronize(lengths_handle).tolist()
    gathered = synchronize(bytes_handle)
    objects, offset = [], 0
    for length in lengths:
        objects.append(_unpickled(gathered[offset:offset + length]))
        offset += length
    return objects


def _initialize_state(optimizer):
    """Gives a fresh optimizer its state (momentum buffers, step counts) with one step on zero
    gradients, so that every rank holds the same state entries to broadcast."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
    # A DistributedOptimizer's own step() would allreduce; this step must stay local.
    from hoop.torch.optimizer import _DistributedOptimizer
    if isinstance(optimizer, _DistributedOptimizer):
        super(_DistributedOptimizer, optimizer).step()
    else:
        optimizer.step()


def _state_entries(optimizer):
    """(key, container, field) for every option of every param group and every per-parameter
    state entry, keyed identically on every rank: by group index, and by entry name plus
    occurrence count (the parameters of each group are in model order)."""
    occurrences = collections.defaultdict(int)
    for index, group in enumerate(optimizer.param_groups):
        for option in sorted(group):
            if option != "params":
                yield f"{option}.{index}", group, option
        for p in group["params"]:
            state = optimizer.state.get(p)
            for field in sorted(state or {}):
                occurrences[field] += 1
                yield f"{field}.{occurrences[field]}", state, field


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Overwrites the optimizer's state and options (learning rate, momentum, ...) with
    root_rank's. A fresh optimizer is given its state first by a step on zero gradients.

    Tensors in the state are broadcast in place; everything else (floats, tuples such as
    Adam's betas, flags) travels as one pickled object.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if not optimizer.state:
        _initialize_state(optimizer)

    tensors, scalars, targets = [], {}, {}
    for key, container, field in _state_entries(optimizer):
        value = container[field]
        if torch.is_tensor(value):
            tensors.append((f"optimizer.{key}", value))
        else:
            scalars[key] = value
            targets[key] = (container, field)
    broadcast_parameters(tensors, root_rank, process_set)
    synced = broadcast_object(scalars, root_rank, "optimizer.options", process_set)
    for key, (container, field) in targets.items():
        container[field] = synced[key]
