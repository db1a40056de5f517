"""Asynchronous and in-place collectives of hoop.torch (horovod.torch's *_async and *_
functions), plus poll, synchronize, join and barrier.

Each *_async function starts the work and returns an integer handle; synchronize(handle)
waits and returns the result. Every rank must submit the same names with the same dtypes and
shapes; unnamed calls get "<kind>.noname.<n>" names from per-kind counters, so ranks making
the same unnamed calls in the same order agree.
"""

import torch

from hoop import _hoop
from hoop.torch import handles
from hoop.torch.basics import Average, Sum, handle_average_backwards_compatibility, op_name
from hoop.torch.process_sets import global_process_set, root_in_set, set_id

## True once the operation of a handle has finished (hoop.torch.handles.poll).
poll = handles.poll
## Waits for the operation of a handle and returns its result (hoop.torch.handles.synchronize).
synchronize = handles.synchronize


def _reduce_args(op, prescale_factor, postscale_factor, process_set):
    return op_name(op), float(prescale_factor), float(postscale_factor), set_id(process_set)


def _start_allreduce(tensor, output, name, op, prescale_factor, postscale_factor, process_set,
                     finish):
    args = _reduce_args(op, prescale_factor, postscale_factor, process_set)
    dtype = handles.check_tensor(tensor, "allreduce")
    full_name = handles.op_name("allreduce", name, set_id(process_set))
    return handles.start(
        [lambda: _hoop.allreduce_async(full_name, handles.ptr(tensor), handles.ptr(output), dtype,
                                       handles.shape(tensor), *args, handles.device(tensor))],
        (tensor, output), finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts averaging (op=Average, the default) or otherwise reducing `tensor` over the ranks
    of the set into a new tensor; the input is not modified. Returns a handle."""
    op = handle_average_backwards_compatibility(op, average)
    handles.check_tensor(tensor, "allreduce")
    source = handles.contiguous(tensor)
    output = torch.empty_like(source)
    return _start_allreduce(source, output, name, op, prescale_factor, postscale_factor,
                            process_set, lambda _: output)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing `tensor` in place; synchronize() returns the tensor itself."""
    op = handle_average_backwards_compatibility(op, average)
    handles.check_tensor(tensor, "allreduce")
    buffer, finish = handles.in_place(tensor)

    return _start_allreduce(buffer, buffer, name, op, prescale_factor, postscale_factor,
                            process_set, finish)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` in place over the ranks of the set and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _start_grouped_allreduce(inputs, outputs, name, op, prescale_factor, postscale_factor,
                             process_set, finish):
    args = _reduce_args(op, prescale_factor, postscale_factor, process_set)
    dtypes = [handles.check_tensor(t, "grouped_allreduce") for t in inputs]
    base = handles.op_name("grouped_allreduce", name, set_id(process_set))
    names = [f"{base}.{i}" for i in range(len(inputs))]
    if not inputs:
        return handles.start([], (), finish)
    device = handles.same_device(inputs, "grouped_allreduce")
    return handles.start(
        [lambda: _hoop.grouped_allreduce_async(
            names, [handles.ptr(t) for t in inputs], [handles.ptr(t) for t in outputs], dtypes,
            [handles.shape(t) for t in inputs], *args, device)],
        (tuple(inputs), tuple(outputs)), finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors as one fused unit into new tensors; synchronize()
    returns the list of results. `name` is the base name of the group."""
    op = handle_average_backwards_compatibility(op, average)
    for t in tensors:
        handles.check_tensor(t, "grouped_allreduce")
    inputs = [handles.contiguous(t) for t in tensors]
    outputs = [torch.empty_like(t) for t in inputs]
    return _start_grouped_allreduce(inputs, outputs, name, op, prescale_factor,
                                    postscale_factor, process_set, lambda _: list(outputs))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors in place as one unit; synchronize() returns them."""
    op = handle_average_backwards_compatibility(op, average)
    tensors = list(tensors)
    for t in tensors:
        handles.check_tensor(t, "grouped_allreduce")
    buffers = [handles.contiguous(t) for t in tensors]

    def finish(_):
        with torch.no_grad():
            for t, b in zip(tensors, buffers):
                if b is not t:
                    t.copy_(b)
        return tensors

    return _start_grouped_allreduce(buffers, buffers, name, op, prescale_factor,
                                    postscale_factor, process_set, finish)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors in place as one unit and returns them."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def _gather_starter(tensor, full_name, process_set_id):
    dtype = handles.check_tensor(tensor, "allgather")
    return lambda: _hoop.allgather_async(full_name, handles.ptr(tensor), dtype,
                                         handles.shape(tensor), process_set_id,
                                         handles.device(tensor))


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's `tensor` along the first dimension (rank order; the
    first dimension may differ between ranks). synchronize() returns the new tensor."""
    handles.check_tensor(tensor, "allgather")
    source = handles.contiguous(tensor)
    ps = set_id(process_set)
    starter = _gather_starter(source, handles.op_name("allgather", name, ps), ps)
    return handles.start([starter], (source,),
                         lambda hs: handles.take_output(hs[0], source))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts an allgather of each tensor of a list; synchronize() returns the list."""
    for t in tensors:
        handles.check_tensor(t, "grouped_allgather")
    sources = [handles.contiguous(t) for t in tensors]
    base = handles.op_name("grouped_allgather", name, set_id(process_set))
    ps = set_id(process_set)
    starters = [_gather_starter(t, f"{base}.{i}", ps) for i, t in enumerate(sources)]
    return handles.start(
        starters, tuple(sources),
        lambda hs: [handles.take_output(h, t) for h, t in zip(hs, sources)])


class _SparseHandle(int):
    """sparse_allreduce_async's handle: an ordinary handle for poll() and synchronize(), and
    also callable for the result, since horovod returns a function there and its callers
    (horovod's own optimizer among them) call it."""

    __slots__ = ()

    def __call__(self):
        return synchronize(self)


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts combining a sparse COO `tensor` over the ranks of the set: every rank's indices
    and values are allgathered (op=Sum) and the values divided by the set's size (op=Average).
    synchronize(handle), or handle(), returns a sparse tensor of the input's size whose
    duplicate indices add up, so it coalesces to the dense sum or average.

    name: the base name of the two allgathers ("<name>.indices", "<name>.values"); None
    numbers them like other unnamed calls.
    """
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise ValueError("sparse_allreduce_async: expected a sparse COO tensor")
    if op not in (Average, Sum):
        # A gather can only add: min, max or product of the values at one index would need a
        # reduction per index that no rank has the whole of.
        raise ValueError(f"sparse_allreduce_async: op must be Average or Sum, not {op!r}")
    ps = set_id(process_set)
    # Coalescing first sends each index once, however often backward() produced it.
    local = tensor.coalesce()
    # allgather concatenates along the first dimension: one row per nonzero.
    indices = local.indices().t().contiguous()
    values = handles.contiguous(local.values())
    base = handles.op_name("sparse_allreduce", name, ps)
    divisor = process_set.size() if op == Average else 1

    def finish(hs):
        all_indices = handles.take_output(hs[0], indices)
        all_values = handles.take_output(hs[1], values)
        if divisor != 1:
            all_values = all_values / divisor
        return torch.sparse_coo_tensor(all_indices.t(), all_values, tensor.size())

    handle = handles.start([_gather_starter(indices, f"{base}.indices", ps),
                            _gather_starter(values, f"{base}.values", ps)],
                           (indices, values), finish)
    return _SparseHandle(handle)


def _start_broadcast(buffer, root_rank, name, process_set, finish):
    dtype = handles.check_tensor(buffer, "broadcast")
    root = root_in_set(process_set, root_rank)
    ps = set_id(process_set)
    full_name = handles.op_name("broadcast", name, set_id(process_set))
    return handles.start(
        [lambda: _hoop.broadcast_async(full_name, handles.ptr(buffer), dtype,
                                       handles.shape(buffer), root, ps, handles.device(buffer))],
        (buffer,), finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts copying `tensor` of global rank `root_rank` to every rank of the set into a new
    tensor; the input is not modified. synchronize() returns the new tensor."""
    handles.check_tensor(tensor, "broadcast")
    output = tensor.clone(memory_format=torch.contiguous_format)
    return _start_broadcast(output, root_rank, name, process_set, lambda _: output)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts overwriting `tensor` with root_rank's; synchronize() returns the tensor."""
    handles.check_tensor(tensor, "broadcast")
    buffer, finish = handles.in_place(tensor)

    return _start_broadcast(buffer, root_rank, name, process_set, finish)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's on every rank of the set and returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def _split_list(splits):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        return [int(s) for s in splits.flatten().tolist()]
    return [int(s) for s in splits]


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts sending splits[j] first-dimension rows of `tensor` to rank j of the set (None:
    an even split). synchronize() returns (output, received_splits as an int32 tensor)."""
    dtype = handles.check_tensor(tensor, "alltoall")
    source = handles.contiguous(tensor)
    split_list = _split_list(splits)
    ps = set_id(process_set)
    full_name = handles.op_name("alltoall", name, set_id(process_set))

    def finish(hs):
        output = handles.take_output(hs[0], source)
        received = torch.tensor(_hoop.received_splits(hs[0]), dtype=torch.int32)
        return output, received

    return handles.start(
        [lambda: _hoop.alltoall_async(full_name, handles.ptr(source), dtype,
                                      handles.shape(source), split_list, ps,
                                      handles.device(source))],
        (source,), finish)


def _scatter_starter(tensor, full_name, args):
    dtype = handles.check_tensor(tensor, "reducescatter")
    return lambda: _hoop.reducescatter_async(full_name, handles.ptr(tensor), dtype,
                                             handles.shape(tensor), *args,
                                             handles.device(tensor))


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing `tensor` over the set, leaving each rank its share of the first
    dimension (as even as possible, the first ranks taking one row more). synchronize()
    returns this rank's share."""
    handles.check_tensor(tensor, "reducescatter")
    source = handles.contiguous(tensor)
    args = _reduce_args(op, prescale_factor, postscale_factor, process_set)
    full_name = handles.op_name("reducescatter", name, set_id(process_set))
    starter = _scatter_starter(source, full_name, args)
    return handles.start([starter], (source,),
                         lambda hs: handles.take_output(hs[0], source))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter of each tensor of a list; synchronize() returns the list."""
    for t in tensors:
        handles.check_tensor(t, "grouped_reducescatter")
    sources = [handles.contiguous(t) for t in tensors]
    args = _reduce_args(op, prescale_factor, postscale_factor, process_set)
    base = handles.op_name("grouped_reducescatter", name, set_id(process_set))
    starters = [_scatter_starter(t, f"{base}.{i}", args) for i, t in enumerate(sources)]
    return handles.start(
        starters, tuple(sources),
        lambda hs: [handles.take_output(h, t) for h, t in zip(hs, sources)])


def join(device=-1):
    """Declares that this rank has no more tensors this step: until every rank has joined,
    the others' allreduces count zeros from it. Returns the rank that joined last.

    device: accepted for horovod compatibility; a joined rank's zeros need no tensor here.
    """
    del device
    h = _hoop.join_async(set_id(global_process_set))
    try:
        _hoop.wait(h)
        return _hoop.last_joined_rank(h)
    finally:
        _hoop.release(h)


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has reached its barrier."""
    _hoop.barrier(set_id(process_set))
