"""The blocking, out-of-place collectives of hoop.torch (horovod.torch's allreduce,
allgather, broadcast, alltoall, reducescatter and grouped variants).

Each is an autograd function, as in horovod: when the input requires grad, the backward
pass runs the matching collective on the gradient (allreduce -> allreduce with the same op and
scales; allgather -> averaged gradient, this rank's rows; broadcast -> averaged gradient on
the root, zeros elsewhere; alltoall -> alltoall back; reducescatter -> allgather).
"""

import torch

from hoop.torch import basics, handles, mpi_ops
from hoop.torch.basics import Average, Sum, handle_average_backwards_compatibility
from hoop.torch.compression import Compression
from hoop.torch.process_sets import global_process_set

_sync = mpi_ops.synchronize


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return _sync(mpi_ops.allreduce_async(tensor, None, name, op, prescale_factor,
                                             postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        op, pre, post, ps = ctx.args
        grad = _sync(mpi_ops.allreduce_async(grad_output, None, None, op, pre, post, ps))
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Averages (op=Average, the default) or otherwise reduces `tensor` over the ranks of the
    set and returns the result as a new tensor; the input is not modified.

    prescale_factor multiplies each rank's input before the reduction, postscale_factor the
    result after it (both for floating-point tensors). `average` is horovod's deprecated
    spelling of op=Average/Sum; giving both is an error.
    """
    op = handle_average_backwards_compatibility(op, average)
    compressed, cctx = compression.compress(tensor)
    reduced = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                               process_set)
    return compression.decompress(reduced, cctx)


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return tuple(_sync(mpi_ops.grouped_allreduce_async(
            list(tensors), None, name, op, prescale_factor, postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        op, pre, post, ps = ctx.args
        grads = _sync(mpi_ops.grouped_allreduce_async(list(grad_outputs), None, None, op, pre,
                                                      post, ps))
        return (None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors as one fused unit; returns a list of new tensors."""
    op = handle_average_backwards_compatibility(op, average)
    tensors = list(tensors)
    if not tensors:
        return []
    compressed = [compression.compress(t) for t in tensors]
    reduced = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                      *[c for c, _ in compressed])
    return [compression.decompress(r, cctx) for r, (_, cctx) in zip(reduced, compressed)]


def _rows_of_this_rank(grad, rows, process_set):
    """The slice of an allgathered gradient that came from this rank."""
    all_rows = _sync(mpi_ops.allgather_async(torch.tensor([rows], dtype=torch.int64),
                                             process_set=process_set))
    offset = int(all_rows[:process_set.rank()].sum())
    return grad.narrow(0, offset, rows)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.process_set = process_set
        return _sync(mpi_ops.allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = _sync(mpi_ops.allreduce_async(grad_output, op=Average,
                                             process_set=ctx.process_set))
        return _rows_of_this_rank(grad, ctx.rows, ctx.process_set), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's `tensor` along the first dimension, in rank order, into a new
    tensor. The first dimension may differ between ranks; the rest must not."""
    handles.check_tensor(tensor, "allgather")
    return _Allgather.apply(tensor, name, process_set)


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.process_set = process_set
        return tuple(_sync(mpi_ops.grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        # As for one tensor (_Allgather), the group's gradients reduced as one fused unit.
        reduced = _sync(mpi_ops.grouped_allreduce_async(list(grads), op=Average,
                                                        process_set=ctx.process_set))
        return (None, None) + tuple(_rows_of_this_rank(g, rows, ctx.process_set)
                                    for g, rows in zip(reduced, ctx.rows))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor of a list; returns the list of results (with autograd)."""
    for t in tensors:
        handles.check_tensor(t, "grouped_allgather")
    return list(_GroupedAllgather.apply(name, process_set, *tensors))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return _sync(mpi_ops.broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = _sync(mpi_ops.allreduce_async(grad_output, op=Average,
                                             process_set=ctx.process_set))
        if basics.rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns a new tensor holding global rank `root_rank`'s `tensor` on every rank of the
    set; the input is not modified."""
    return _Broadcast.apply(tensor, root_rank, name, process_set)


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = _sync(mpi_ops.alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, _received_grad):
        grad, _ = _sync(mpi_ops.alltoall_async(grad_output, ctx.received,
                                               process_set=ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[j] first-dimension rows of `tensor` to rank j of the set and returns the
    rows received from every rank, concatenated in rank order. splits: a list or int tensor;
    None splits the first dimension evenly.

    Returns the output tensor alone when splits is None, else (output, received_splits) with
    received_splits an int32 tensor of the rows that came from each rank (as horovod 0.28).
    """
    output, received = _Alltoall.apply(tensor, splits, name, process_set)
    if splits is None:
        return output
    return output, received


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.scale = prescale_factor * postscale_factor
        ctx.op = op
        ctx.process_set = process_set
        return _sync(mpi_ops.reducescatter_async(tensor, name, op, process_set,
                                                 prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.op not in (Average, Sum):
            raise RuntimeError("reducescatter: gradients exist only for op=Average or Sum")
        grad = _sync(mpi_ops.allgather_async(grad_output, process_set=ctx.process_set))
        # Horovod's convention: the gathered gradient, times the set's size for Sum (as an
        # allreduce's Sum gradient is the sum of every rank's), as is for Average.
        scale = ctx.scale * ctx.process_set.size() if ctx.op == Sum else ctx.scale
        return grad * scale, None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `tensor` over the ranks of the set and returns this rank's share of the first
    dimension (rows split as evenly as possible, the first ranks taking one more)."""
    compressed, cctx = compression.compress(tensor)
    reduced = _Reducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                   postscale_factor)
    return compression.decompress(reduced, cctx)


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.scale = prescale_factor * postscale_factor
        ctx.op = op
        ctx.process_set = process_set
        return tuple(_sync(mpi_ops.grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grads):
        if ctx.op not in (Average, Sum):
            raise RuntimeError("reducescatter: gradients exist only for op=Average or Sum")
        gathered = _sync(mpi_ops.grouped_allgather_async(list(grads),
                                                         process_set=ctx.process_set))
        scale = ctx.scale * ctx.process_set.size() if ctx.op == Sum else ctx.scale
        return (None,) * 5 + tuple(g * scale for g in gathered)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each tensor of a list; returns the list of shares (with autograd)."""
    compressed = [compression.compress(t) for t in tensors]
    reduced = _GroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                          postscale_factor, *[c for c, _ in compressed])
    return [compression.decompress(r, cctx) for r, (_, cctx) in zip(reduced, compressed)]
