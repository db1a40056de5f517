"""hoop.jax: hoop's collectives on JAX arrays, inside jax.jit and eagerly, with gradients.

    import hoop.jax as hvd
    hvd.init()
    grads = hvd.allreduce_gradients(grads)            # averaged over the ranks, fused
    tx = hvd.DistributedOptimizer(optax.adam(1e-3))   # the same, as an optax transformation
    params = hvd.broadcast_parameters(params, root_rank=0)

Each collective is an XLA custom call (the FFI handlers of libhoop_jax.so), so it compiles
into a jitted step and runs through hoop's runtime there: negotiation, fusion of the tensors
of one call, the response cache, the timeline, process sets. Multi-process only: one process
per CPU (or device), launched by hooprun; it does not replace jax.distributed. Host (CPU)
arrays only.

Under jax.jit every rank must pass allgather and alltoall inputs of the same shape (the output
shape is part of the compiled program); eagerly, first dimensions may differ per rank.
"""

import ctypes
import collections
import functools
import hashlib
import itertools
import os

import jax
import jax._src.core
import jax._src.dispatch
import jax._src.interpreters.partial_eval
import jax.extend.core
import jax.interpreters.mlir
import jax.numpy as jnp
import numpy as np
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import hlo

from hoop import HoopError, HoopValueError, _hoop
from hoop._hoop import (cross_rank, cross_size, is_initialized, local_rank,  # noqa: F401
                        local_size, rank, size)
from hoop._ops import Adasum, Average, Max, Min, Product, Sum

# The runtime's ReduceOp values (include/hoop/core.h) the FFI handlers take.
_RUNTIME_OP = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4, Adasum: 5}
_RUNTIME_OP_ATTR = {op: np.int64(value) for op, value in _RUNTIME_OP.items()}
_OP_TEXT = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
            Product: "Product"}

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "cross_rank", "cross_size", "allreduce", "grouped_allreduce", "allgather",
           "broadcast", "reducescatter", "alltoall", "barrier", "broadcast_parameters",
           "allreduce_gradients", "DistributedOptimizer", "add_process_set",
           "remove_process_set", "Average", "Sum", "Adasum", "Min", "Max", "Product",
           "HoopError", "HoopValueError"]

_TARGETS = ("allreduce", "broadcast", "allgather", "reducescatter", "alltoall")


def _register():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libhoop_jax.so")
    if not os.path.exists(path):
        raise ImportError(f"hoop.jax: {path} is missing: this build of hoop has no JAX adapter "
                          "(configure with the frameworks environment: scripts/install-frameworks)")
    lib = ctypes.cdll.LoadLibrary(path)
    for target in _TARGETS:
        handler = jax.ffi.pycapsule(getattr(lib, f"hoop_jax_{target}"))
        jax.ffi.register_ffi_target(f"hoop_{target}", handler, platform="cpu")


_register()

# Generated names count per process set: only a set's members call its collectives.
_counters = collections.defaultdict(itertools.count)


def init():
    """Joins the job the launcher (hooprun, mpirun, Slurm) described."""
    if not _hoop.is_initialized():
        # Generated names restart with the job, so that every rank counts from the same point.
        _counters.clear()
        _hoop.init()


def shutdown():
    """Finishes the work in flight on every rank and leaves the job."""
    _hoop.shutdown()


def barrier(process_set=0):
    """Returns once every rank of the set has called it."""
    _hoop.barrier(_set_id(process_set))


def add_process_set(ranks):
    """Creates a process set of these global ranks (every rank calls it); returns its id."""
    return _hoop.add_process_set(list(ranks))


def remove_process_set(process_set):
    """Removes a process set (every rank calls it)."""
    _hoop.remove_process_set(_set_id(process_set))


def _set_id(process_set):
    return int(getattr(process_set, "process_set_id", process_set))


def _name(kind, name, process_set):
    # A generated name is taken when the call is traced: a jitted step keeps its names from one
    # run to the next, and every rank of the set traces the same program in the same order.
    if name is not None:
        return name
    ps = _set_id(process_set)
    n = next(_counters[ps])
    return f"jax.{kind}.{n}" if ps == 0 else f"jax.set{ps}.{kind}.{n}"


def _op(op):
    if op not in _RUNTIME_OP:
        raise ValueError(f"unsupported reduce op {op!r}: hoop.jax offers Average, Sum, Adasum, "
                         "Min, Max and Product")
    return _RUNTIME_OP_ATTR[op]


_NAME_BYTES = 64  # adapters/jax/ffi.cc's kNameBytes


@functools.lru_cache(maxsize=4096)
def _name_bytes(name):
    """A tensor's name as the handlers' first operand: its bytes, zero-padded. A longer name
    keeps its tail and a digest of the whole (the same on every rank)."""
    raw = name.encode()
    if len(raw) >= _NAME_BYTES:
        raw = raw[-(_NAME_BYTES - 18):] + b"#" + hashlib.sha1(raw).hexdigest()[:16].encode()
    return np.frombuffer(raw.ljust(_NAME_BYTES, b"\0"), dtype=np.uint8)


@functools.lru_cache(maxsize=4096)
def _name_on_device(name):
    """The name operand of an eager call, kept as a device array so that the call transfers
    nothing for it. Only outside any trace: under one, device_put would give (and the cache
    keep) a tracer."""
    return jax.device_put(_name_bytes(name))


# One primitive for every collective: the FFI target and attributes are its parameters. It is
# lowered as a custom call with a side effect, which XLA never leaves out or merges, and it
# carries no JAX effect, which would cost every jitted call JAX's slow dispatch path (35 us on
# the development machine; an ordered effect, which would order the calls for us, made a jitted
# lone allreduce 17x slower and a jitted step of 400 tensors 2.5x). Its DCE rule keeps it in a
# jaxpr even where a rank does not use its result (only rank 0 logs it, the non-root side of
# broadcast's gradient), so that it runs on every rank alike.
#
# The custom calls of one function body are chained by a token (each call's token is the
# next one's operand) so that XLA runs them in the order they were traced, on every rank alike.
# Without the chain XLA runs calls that do not depend on each other in whatever order their
# inputs become ready, also concurrently on its thread pool; each call blocks until every rank
# has submitted its tensor, so two ranks that started different calls first waited for each
# other for ever (jax.collectives_np2 hung so under load; tests/jax/order_test.py).
_collective_p = jax.extend.core.Primitive("hoop_collective")
_collective_p.multiple_results = True

# Where a module's lowering keeps the last token of each block it has put a call into: a list
# under this key of the module's own lowering caches, so it ends with the module.
_TOKENS_KEY = ("hoop.jax", "the last collective's token, by block")


def _abstract(*_args, target, outs, attrs):
    del target, attrs
    return [jax.core.ShapedArray(shape, dtype) for shape, dtype in outs]


def _lower(ctx, *operands, target, outs, attrs):
    del outs
    values = {k: np.asarray(v, dtype=np.int64) if isinstance(v, tuple) else v for k, v in attrs}
    # A value defined earlier in the same block dominates the ops after it: the chain may use
    # it. Calls in other blocks (a loop's body, another function) start chains of their own.
    block = ir.InsertionPoint.current.block
    tokens = ctx.module_context.cached_primitive_lowerings.setdefault(_TOKENS_KEY, [])
    last = next((i for i, (b, _) in enumerate(tokens) if b == block), None)
    token = tokens[last][1] if last is not None else hlo.create_token()
    token_aval = jax._src.core.abstract_token
    rule = jax.ffi.ffi_lowering(f"hoop_{target}", has_side_effect=True)
    token, *results = rule(ctx.replace(avals_in=[token_aval, *ctx.avals_in],
                                       avals_out=[token_aval, *ctx.avals_out]),
                           token, *operands, **values)
    if last is None:
        tokens.append((block, token))
    else:
        tokens[last] = (block, token)
    return results


_collective_p.def_impl(functools.partial(jax._src.dispatch.apply_primitive, _collective_p))
_collective_p.def_abstract_eval(_abstract)
# Not cacheable: JAX would lower each set of parameters once into a function of its own and call
# it, and the calls would share no block to chain in. (Platform "cpu", inline, not cacheable,
# positionally: Doxygen reads a keyword argument at module level as an undocumented variable.)
jax.interpreters.mlir.register_lowering(_collective_p, _lower, "cpu", True, False)
jax._src.interpreters.partial_eval.dce_rules[_collective_p] = (
    lambda used_outputs, eqn: ([True] * len(eqn.invars), eqn))


@functools.lru_cache(maxsize=1024)
def _compiled(target, specs, attrs):
    """An eager call, compiled once per target, output shapes and attributes (the name is an
    operand): a jitted function dispatches on JAX's fast path, faster than the primitive's own."""
    return jax.jit(lambda *operands: _collective_p.bind(*operands, target=target, outs=specs,
                                                        attrs=attrs))


def _call(target, outs, name, *args, **attrs):
    """Runs FFI target hoop_<target> on the name operand and `args`, giving arrays shaped as
    `outs` (one ShapeDtypeStruct, or a list of them)."""
    many = not isinstance(outs, jax.ShapeDtypeStruct)
    specs = tuple((tuple(o.shape), np.dtype(o.dtype)) for o in (outs if many else [outs]))
    # Array attributes travel as tuples, so that the parameters stay hashable.
    attrs = tuple(sorted((k, tuple(int(i) for i in v) if isinstance(v, np.ndarray) else v)
                         for k, v in attrs.items()))
    if any(_traced(a) for a in args):
        results = _collective_p.bind(_name_bytes(name), *args, target=target, outs=specs,
                                     attrs=attrs)
    else:
        # The call completes here, so that a failure raises hoop's exception at the call
        # (under jax.jit it raises JAX's JaxRuntimeError, carrying the same message, where the
        # result is used).
        try:
            results = jax.block_until_ready(
                _compiled(target, specs, attrs)(_name_on_device(name), *args))
        except (jax.errors.JaxRuntimeError, ValueError) as e:
            # JAX raises an execution's failure as JaxRuntimeError or, from some paths, as
            # ValueError; both carry XLA's status code before hoop's message.
            if not str(e).startswith(("INTERNAL: ", "INVALID_ARGUMENT: ")):
                raise
            raise _hoop_error(str(e)) from None
    return list(results) if many else results[0]


def _hoop_error(text):
    """hoop's exception for an FFI failure as JAX reports it ("INTERNAL: code: message")."""
    kind = HoopValueError if text.startswith("INVALID_ARGUMENT") else HoopError
    message = text.split(": ", 1)[-1]
    error = kind(message)
    error.code, _, rest = message.partition(": ")
    error.message = rest or message
    return error


def _traced(x):
    return isinstance(x, jax.core.Tracer)


def _array(x):
    # jnp.asarray costs tens of microseconds even for an array that is one already.
    return x if isinstance(x, (jax.Array, jax.core.Tracer)) else jnp.asarray(x)


# allreduce -------------------------------------------------------------------------------------

def _check_reducible(x, op, name):
    """Refuses, when the call is made (also under tracing, and for zero elements, which XLA
    never runs), an op the FFI handler would refuse for this dtype."""
    dtype = np.dtype(x.dtype)
    if dtype == np.bool_:
        ok = op in (Min, Max)
    elif dtype.kind == "u" and dtype.itemsize > 1:
        ok = op in (Sum, Product)
    elif dtype.kind == "c":
        ok = op in (Sum, Average)
    else:
        ok = True
    if not ok:
        raise HoopValueError(
            f"hoop.jax: {dtype} cannot be reduced with op {_OP_TEXT[op]}, tensor '{name}' (bool "
            "takes min and max; unsigned integers sum and product; complex numbers sum and "
            "average)")


def _allreduce_raw(xs, name, op, prescale, postscale, ps):
    for x in xs:
        _check_reducible(x, op, name)
    outs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs]
    return _call("allreduce", outs, name, *xs, op=_op(op), prescale=np.float64(prescale),
                 postscale=np.float64(postscale), process_set=np.int64(ps))


def _with_gradient(raw, backward, statics):
    """raw(x, *statics) as a differentiable function whose cotangent for x is
    backward(*statics, g); the statics (name, op, ranks...) are not differentiated."""
    fn = jax.custom_vjp(raw, nondiff_argnums=tuple(range(1, 1 + statics)))
    fn.defvjp(lambda x, *static: (raw(x, *static), None),
              lambda *args: (backward(*args[:-2], args[-1]),))
    return fn


def _allreduce_grad(name, op, prescale, postscale, ps, gs):
    # d(sum_r s x_r)/dx_me = s for every rank's output: each rank's cotangent flows back summed
    # (averaged for Average), with the same scales, as in Horovod.
    if op not in (Sum, Average):
        raise HoopValueError(f"hoop.jax: allreduce with op {_OP_TEXT[op]} has no gradient "
                             f"(tensor '{name}'); only Sum and Average do")
    return list(_allreduce_raw(list(gs), name + ".grad", op, prescale, postscale, ps))


_allreduce_diff = _with_gradient(_allreduce_raw, _allreduce_grad, 5)


def grouped_allreduce(tensors, op=Average, name=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=0):
    """Allreduces a list of arrays as one group (one negotiation, fused); returns a list."""
    tensors = [_array(t) for t in tensors]
    if not tensors:
        return []
    # Outside any transformation there is nothing to differentiate: the plain call is cheaper.
    run = _allreduce_diff if any(_traced(t) for t in tensors) else _allreduce_raw
    out = run(tensors, _name("allreduce", name, process_set), op, float(prescale_factor),
              float(postscale_factor), _set_id(process_set))
    return list(out)


def allreduce(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=0):
    """The elementwise reduction of `tensor` over the ranks (Average by default)."""
    return grouped_allreduce([tensor], op, name, prescale_factor, postscale_factor,
                             process_set)[0]


# broadcast -------------------------------------------------------------------------------------

def _broadcast_raw(x, name, root, ps):
    return _call("broadcast", jax.ShapeDtypeStruct(x.shape, x.dtype), name, x,
                 root=np.int64(root), process_set=np.int64(ps))


def _broadcast_grad(name, root, ps, g):
    # Every rank's output is the root's input: the root receives the sum of the cotangents.
    total = _allreduce_raw([g], name + ".grad", Sum, 1.0, 1.0, ps)[0]
    return total if _hoop.process_set_rank(ps) == root else jnp.zeros_like(g)


_broadcast_diff = _with_gradient(_broadcast_raw, _broadcast_grad, 3)


def broadcast(tensor, root_rank, name=None, process_set=0):
    """The root rank's `tensor`, on every rank."""
    return _broadcast_diff(_array(tensor), _name("broadcast", name, process_set), int(root_rank),
                           _set_id(process_set))


# allgather -------------------------------------------------------------------------------------

def _first_dims(x, name, ps):
    """Every rank's first dimension: exchanged eagerly, assumed equal under tracing."""
    n = len(_hoop.process_set_ranks(ps))
    d0 = x.shape[0]
    if _traced(x):
        return [d0] * n
    mine = jnp.asarray([d0], dtype=jnp.int32)
    dims = _call("allgather", jax.ShapeDtypeStruct((n,), jnp.int32), name + ".dims", mine,
                 process_set=np.int64(ps))
    return [int(d) for d in np.asarray(dims)]


def _allgather_raw(x, name, ps, dims):
    out = jax.ShapeDtypeStruct((sum(dims),) + tuple(x.shape[1:]), x.dtype)
    return _call("allgather", out, name, x, process_set=np.int64(ps))


def _allgather_grad(name, ps, dims, g):
    # Each rank's rows appear once in every rank's output: their cotangent is the sum over the
    # ranks of that slice.
    total = _allreduce_raw([g], name + ".grad", Sum, 1.0, 1.0, ps)[0]
    me = _hoop.process_set_rank(ps)
    return jax.lax.slice_in_dim(total, sum(dims[:me]), sum(dims[:me + 1]), axis=0)


_allgather_diff = _with_gradient(_allgather_raw, _allgather_grad, 3)


def allgather(tensor, name=None, process_set=0):
    """Every rank's `tensor`, concatenated along the first dimension in rank order."""
    x = _array(tensor)
    if x.ndim == 0:
        x = x.reshape(1)
    name = _name("allgather", name, process_set)
    ps = _set_id(process_set)
    return _allgather_diff(x, name, ps, tuple(_first_dims(x, name, ps)))


# reducescatter and alltoall --------------------------------------------------------------------

def _share(rows, n, r):
    # The runtime's split: rows // n each, one more for the first rows % n ranks.
    return rows // n + (1 if r < rows % n else 0)


def reducescatter(tensor, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=0):
    """This rank's share of the reduction of `tensor`, split along the first dimension."""
    x = jnp.asarray(tensor)
    if x.ndim == 0:
        raise HoopValueError("hoop.jax: reducescatter needs an array of at least one dimension")
    ps = _set_id(process_set)
    name = _name("reducescatter", name, process_set)
    _check_reducible(x, op, name)
    n = len(_hoop.process_set_ranks(ps))
    rows = _share(x.shape[0], n, _hoop.process_set_rank(ps))
    out = jax.ShapeDtypeStruct((rows,) + tuple(x.shape[1:]), x.dtype)
    return _call("reducescatter", out, name, x, op=_op(op),
                 prescale=np.float64(prescale_factor), postscale=np.float64(postscale_factor),
                 process_set=np.int64(ps))


def alltoall(tensor, splits=None, name=None, process_set=0):
    """Sends rows splits[r] of `tensor` to rank r (equal shares without splits); returns the
    rows received, in rank order."""
    x = jnp.asarray(tensor)
    if x.ndim == 0:
        x = x.reshape(1)
    ps = _set_id(process_set)
    n = len(_hoop.process_set_ranks(ps))
    name = _name("alltoall", name, process_set)
    if splits is None:
        if x.shape[0] % n != 0:
            raise HoopValueError(f"hoop.jax: tensor '{name}': {x.shape[0]} rows do not split "
                                 f"evenly over {n} ranks; pass splits")
        rows, sent = x.shape[0], np.zeros(0, np.int64)
    else:
        sent = np.asarray(splits, dtype=np.int64)
        if _traced(x):
            raise HoopValueError("hoop.jax: alltoall with splits runs eagerly only (under "
                                 "jax.jit the received row count must be known in advance)")
        # Every rank learns what it receives from each rank: an alltoall of the splits.
        got = _call("alltoall", jax.ShapeDtypeStruct((n,), jnp.int32), name + ".splits",
                    jnp.asarray(sent, dtype=jnp.int32), splits=np.zeros(0, np.int64),
                    process_set=np.int64(ps))
        rows = int(np.asarray(got).sum())
    out = jax.ShapeDtypeStruct((rows,) + tuple(x.shape[1:]), x.dtype)
    return _call("alltoall", out, name, x, splits=sent, process_set=np.int64(ps))


# pytrees and optax -----------------------------------------------------------------------------

def broadcast_parameters(params, root_rank=0, process_set=0):
    """The root's values of every array in the pytree `params`, on every rank."""
    leaves, tree = jax.tree_util.tree_flatten(params)
    out = [broadcast(leaf, root_rank, name=f"jax.broadcast_parameters.{i}",
                     process_set=process_set) for i, leaf in enumerate(leaves)]
    return jax.tree_util.tree_unflatten(tree, out)


def allreduce_gradients(grads, op=Average, name="jax.gradients", process_set=0):
    """Every array of the pytree `grads` reduced over the ranks in one grouped, fused call."""
    leaves, tree = jax.tree_util.tree_flatten(grads)
    return jax.tree_util.tree_unflatten(
        tree, grouped_allreduce(leaves, op=op, name=name, process_set=process_set))


def DistributedOptimizer(optimizer, op=Average, name="jax.gradients", process_set=0):
    """Wraps an optax GradientTransformation: its updates start from the gradients averaged
    over the ranks (one fused allreduce per step), so every rank applies the same update."""
    import optax  # noqa: PLC0415 -- optax is needed only by this wrapper

    def init_fn(params):
        return optimizer.init(params)

    def update_fn(updates, state, params=None):
        reduced = allreduce_gradients(updates, op=op, name=name, process_set=process_set)
        return optimizer.update(reduced, state, params)

    return optax.GradientTransformation(init_fn, update_fn)
