"""hoop.tensorflow's collectives: the ops of libhoop_tensorflow.so, named, with Horovod's
signatures and gradients. They run eagerly and inside tf.function, where they are
asynchronous kernels completed by hoop's runtime."""

import collections
import functools
import itertools
import os
import re

import tensorflow as tf

from hoop import HoopError, HoopValueError, _hoop
from hoop._compression import NoneCompressor
from hoop._ops import Adasum, Average, Max, Min, Product, Sum
from hoop._process_sets import global_process_set, root_in_set, set_id

# The runtime's ReduceOp values (include/hoop/core.h), the kernels' reduce_op attribute.
_RUNTIME_OP = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4, Adasum: 5}
_OP_TEXT = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
            Product: "Product"}
_OP_TYPES = frozenset(("HoopAllreduce", "HoopBroadcast", "HoopAllgather", "HoopReducescatter",
                       "HoopAlltoall", "HoopBarrier", "HoopJoin"))


def _load():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libhoop_tensorflow.so")
    if not os.path.exists(path):
        raise ImportError(f"hoop.tensorflow: {path} is missing: this build of hoop has no "
                          "TensorFlow adapter (configure with the frameworks environment: "
                          "scripts/install-frameworks)")
    return tf.load_op_library(path)


_lib = _load()


def _unordered():
    """tf.function runs stateful ops in program order, one after the other: for collectives
    that would forbid two in flight at once, so nothing would fuse. hoop's ops are listed with
    the ops that must run but in any order (a private list of TensorFlow's; without it they
    still run correctly, one at a time)."""
    try:
        from tensorflow.python.framework import auto_control_deps as acd  # noqa: PLC0415
        acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS = frozenset(
            acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS | _OP_TYPES)
    except (ImportError, AttributeError):
        pass


_unordered()

# names -----------------------------------------------------------------------------------------

# Eager calls count per process set: only a set's members call its collectives.
_counters = collections.defaultdict(itertools.count)


def reset_names():
    """Generated eager names restart with the job, so that every rank counts from one point."""
    _counters.clear()


def _name(kind, name=None, tensor=None, ignore_name_scope=False, ps=0):
    """The runtime's name of a collective. Eagerly: the given name, else one counted in call
    order on set `ps` (the same on each of its ranks). In a graph: unique within it, from the
    given name or the tensor's, under the name scope unless ignored; every rank traces the same
    graph."""
    if tf.executing_eagerly():
        if name is not None:
            return name
        n = next(_counters[ps])
        return f"tf.{kind}.{n}" if ps == 0 else f"tf.set{ps}.{kind}.{n}"
    graph = tf.compat.v1.get_default_graph()
    if name is None:
        source = getattr(tensor, "name", None) or "tensor"
        name = f"{kind}.{re.sub('[^A-Za-z0-9_.]', '_', source)}"
    scope = "" if ignore_name_scope else graph.get_name_scope()
    return graph.unique_name(f"{scope}/{name}" if scope else name)


def _op_value(op):
    if op not in _RUNTIME_OP:
        raise ValueError(f"unsupported reduce op {op!r}: hoop.tensorflow offers Average, Sum, "
                         "Adasum, Min, Max and Product")
    return _RUNTIME_OP[op]


@functools.lru_cache(maxsize=256)
def _reducible(dtype, op):
    if dtype == tf.bool:
        return op in (Min, Max)
    if dtype.is_unsigned and dtype.size > 1:
        return op in (Sum, Product)
    if dtype.is_complex:
        return op in (Sum, Average)
    return True


def _check_reducible(dtype, op, name):
    """Refuses when the call is made (also in a graph) an op the kernel would refuse."""
    if not _reducible(dtype, op):
        raise HoopValueError(
            f"hoop.tensorflow: {dtype.name} cannot be reduced with op {_OP_TEXT[op]}, tensor "
            f"'{name}' (bool takes min and max; unsigned integers sum and product; complex "
            "numbers sum and average)")


def _hoop_error(e):
    """hoop's exception for a kernel's failure, as TensorFlow raised it eagerly."""
    kind = HoopValueError if isinstance(e, tf.errors.InvalidArgumentError) else HoopError
    # TensorFlow wraps it in the name of the function it ran and of the op.
    text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", e.message)
    return kind(text.split(" [Op:")[0])


@functools.lru_cache(maxsize=4096)
def _eager_name(name):
    # Converting a str to a string tensor costs an eager call tens of microseconds.
    return tf.constant(name)


def _run(fn, name, *args, **kwargs):
    """Runs an op; eagerly, the calling thread waits on the runtime itself (which runs the
    collective at once), and a failure raises hoop's exception (in a graph TensorFlow raises its
    own where the graph runs, carrying the same message)."""
    if not tf.executing_eagerly():
        return fn(name, *args, **kwargs)
    try:
        return fn(_eager_name(name), *args, inline_wait=True, **kwargs)
    except tf.errors.OpError as e:
        raise _hoop_error(e) from None


def _set_size(ps):
    return len(_hoop.process_set_ranks(ps))


# the raw ops, by process-set id ----------------------------------------------------------------

def _allreduce_raw(tensors, name, op, prescale, postscale, ps):
    for t in tensors:
        _check_reducible(t.dtype, op, name)
    return _run(_lib.hoop_allreduce, name, tensors, reduce_op=_op_value(op),
                prescale_factor=float(prescale), postscale_factor=float(postscale),
                process_set_id=ps)


def _allgather_raw(tensor, name, ps):
    return _run(_lib.hoop_allgather, name, tensor, process_set_id=ps)


def _broadcast_raw(tensor, name, root, ps):
    return _run(_lib.hoop_broadcast, name, tensor, root_rank=root, process_set_id=ps)


def _reducescatter_raw(tensor, name, op, prescale, postscale, ps):
    _check_reducible(tensor.dtype, op, name)
    return _run(_lib.hoop_reducescatter, name, tensor, reduce_op=_op_value(op),
                prescale_factor=float(prescale), postscale_factor=float(postscale),
                process_set_id=ps)


def _alltoall_raw(tensor, splits, name, ps):
    return _run(_lib.hoop_alltoall, name, tensor, splits, process_set_id=ps)


# gradients, as Horovod registers them ------------------------------------------------------------

_RUNTIME_TO_OP = {v: k for k, v in _RUNTIME_OP.items()}


def _grad_name(op, kind):
    ps = op.get_attr("process_set_id")
    if tf.executing_eagerly():
        return _name(kind, ps=ps)
    return _name(kind, tensor=op.outputs[0] if op.outputs else None, ps=ps)


tf.no_gradient("HoopBarrier")
tf.no_gradient("HoopJoin")


@tf.RegisterGradient("HoopAllreduce")
def _allreduce_grad(op, *grads):
    # d(sum_r s x_r)/dx_me = s for every rank's output: each rank's gradient flows back summed
    # (averaged for Average), with the same scales.
    reduce_op = _RUNTIME_TO_OP[op.get_attr("reduce_op")]
    if reduce_op not in (Sum, Average):
        raise HoopValueError(f"hoop.tensorflow: allreduce with op {_OP_TEXT[reduce_op]} has no "
                             "gradient; only Sum and Average do")
    grads = [g if g is not None else tf.zeros_like(o) for g, o in zip(grads, op.outputs)]
    out = _allreduce_raw(grads, _grad_name(op, "allreduce_grad"), reduce_op,
                         op.get_attr("prescale_factor"), op.get_attr("postscale_factor"),
                         op.get_attr("process_set_id"))
    return [None] + list(out)


@tf.RegisterGradient("HoopBroadcast")
def _broadcast_grad(op, grad):
    # Every rank's output is the root's input: the root receives the sum of the gradients.
    ps = op.get_attr("process_set_id")
    total = _allreduce_raw([grad], _grad_name(op, "broadcast_grad"), Sum, 1.0, 1.0, ps)[0]
    if _hoop.process_set_rank(ps) != op.get_attr("root_rank"):
        total = tf.zeros_like(total)
    return [None, total]


@tf.RegisterGradient("HoopAllgather")
def _allgather_grad(op, grad):
    # Each rank's rows appear once in every rank's output: their gradient is the sum over the
    # ranks of that slice.
    ps = op.get_attr("process_set_id")
    x = op.inputs[1]
    total = _allreduce_raw([grad], _grad_name(op, "allgather_grad"), Sum, 1.0, 1.0, ps)[0]
    dims = _allgather_raw(tf.shape(x)[:1], _grad_name(op, "allgather_dims"), ps)
    pieces = tf.split(total, dims, axis=0, num=_set_size(ps))
    return [None, pieces[_hoop.process_set_rank(ps)]]


@tf.RegisterGradient("HoopReducescatter")
def _reducescatter_grad(op, grad):
    # This rank's rows of the reduction came from every rank's same rows: each rank's gradient
    # is everyone's gradient gathered, scaled as the forward pass scaled.
    ps = op.get_attr("process_set_id")
    reduce_op = _RUNTIME_TO_OP[op.get_attr("reduce_op")]
    if reduce_op not in (Sum, Average):
        raise HoopValueError(f"hoop.tensorflow: reducescatter with op {_OP_TEXT[reduce_op]} has "
                             "no gradient; only Sum and Average do")
    scale = op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    if reduce_op == Average:
        scale /= _set_size(ps)
    gathered = _allgather_raw(grad, _grad_name(op, "reducescatter_grad"), ps)
    return [None, gathered * tf.cast(scale, gathered.dtype)]


@tf.RegisterGradient("HoopAlltoall")
def _alltoall_grad(op, grad, _splits_grad):
    # The rows go back where they came from.
    ps = op.get_attr("process_set_id")
    back, _ = _alltoall_raw(grad, op.outputs[1], _grad_name(op, "alltoall_grad"), ps)
    return [None, back, None]


# the API of horovod.tensorflow --------------------------------------------------------------------

def _handle_average(op, average):
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if op is not None:
        return op
    return Sum if average is False else Average


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=None,
              op=None, prescale_factor=1.0, postscale_factor=1.0, name=None,
              process_set=global_process_set, ignore_name_scope=False):
    """The elementwise reduction of `tensor` over the ranks (Average by default). A
    tf.IndexedSlices (a sparse gradient) is gathered instead: its values and indices from every
    rank, the values divided by the number of ranks for Average. device_dense and device_sparse
    are accepted for Horovod compatibility (hoop's kernels run on the CPU)."""
    del device_dense, device_sparse
    op = _handle_average(op, average)
    ps = set_id(process_set)
    if isinstance(tensor, tf.IndexedSlices):
        if op not in (Sum, Average):
            raise HoopValueError("hoop.tensorflow: a sparse tensor (tf.IndexedSlices) is "
                                 "reduced with Sum or Average only")
        base = name or "sparse"
        values = allgather(tensor.values, name=f"{base}.values", process_set=process_set,
                           ignore_name_scope=ignore_name_scope)
        indices = allgather(tensor.indices, name=f"{base}.indices", process_set=process_set,
                            ignore_name_scope=ignore_name_scope)
        scale = prescale_factor * postscale_factor / (_set_size(ps) if op == Average else 1)
        if scale != 1:
            values = values * tf.cast(scale, values.dtype)
        return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)
    if not isinstance(tensor, tf.Tensor):
        tensor = tf.convert_to_tensor(tensor)
    name = _name("allreduce", name, tensor, ignore_name_scope, ps)
    if compression is None or compression is NoneCompressor:
        return _allreduce_raw([tensor], name, op, prescale_factor, postscale_factor, ps)[0]
    compressed, ctx = compression.compress(tensor)
    reduced = _allreduce_raw([compressed], name, op, prescale_factor, postscale_factor, ps)[0]
    return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set, name=None, ignore_name_scope=False):
    """Allreduces a list of tensors as one group: one negotiation, fused; returns a list."""
    del device_dense, device_sparse
    compression = compression or NoneCompressor
    op = _handle_average(op, average)
    if not tensors:
        return []
    if any(isinstance(t, tf.IndexedSlices) for t in tensors):
        return [allreduce(t, compression=compression, op=op, prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor, process_set=process_set,
                          name=None if name is None else f"{name}.{i}",
                          ignore_name_scope=ignore_name_scope)
                for i, t in enumerate(tensors)]
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    packed = [compression.compress(t) for t in tensors]
    ps = set_id(process_set)
    name = _name("grouped_allreduce", name, tensors[0], ignore_name_scope, ps)
    reduced = _allreduce_raw([c for c, _ in packed], name, op, prescale_factor,
                             postscale_factor, ps)
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, packed)]


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Every rank's `tensor`, concatenated along the first dimension in rank order (first
    dimensions may differ per rank)."""
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        tensor = tf.reshape(tensor, [1])
    ps = set_id(process_set)
    return _allgather_raw(tensor, _name("allgather", name, tensor, ignore_name_scope, ps), ps)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """The root rank's `tensor` (root_rank: a global rank), on every rank of the set."""
    tensor = tf.convert_to_tensor(tensor)
    ps = set_id(process_set)
    return _broadcast_raw(tensor, _name("broadcast", name, tensor, ignore_name_scope, ps),
                          root_in_set(process_set, root_rank), ps)


def reducescatter(tensor, op=Average, name=None, ignore_name_scope=False,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share of the reduction of `tensor`, split along the first dimension (the
    first rows % size ranks get one row more)."""
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        raise HoopValueError("hoop.tensorflow: reducescatter needs a tensor of at least one "
                             "dimension")
    ps = set_id(process_set)
    return _reducescatter_raw(tensor, _name("reducescatter", name, tensor, ignore_name_scope, ps),
                              op, prescale_factor, postscale_factor, ps)


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends rows splits[r] of `tensor` to rank r (equal shares without splits); returns the
    rows received, in rank order, and how many came from each rank."""
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        tensor = tf.reshape(tensor, [1])
    splits = tf.zeros([0], tf.int32) if splits is None else tf.cast(splits, tf.int32)
    ps = set_id(process_set)
    return _alltoall_raw(tensor, splits, _name("alltoall", name, tensor, ignore_name_scope, ps),
                         ps)


def join(process_set=global_process_set):
    """This rank has no more tensors: it joins the others' collectives with zeros until every
    rank has joined. Returns the rank that joined last."""
    return _run(_lib.hoop_join, "join", process_set_id=set_id(process_set))


def barrier(process_set=global_process_set):
    """Returns (eagerly) or completes (in a graph) once every rank of the set has reached it."""
    ps = set_id(process_set)
    return _run(_lib.hoop_barrier, _name("barrier", ps=ps), process_set_id=ps)
