"""What hoop.keras does per Keras backend: a grouped allreduce of the backend's tensors (inside
the backend's compiled train step: tf.function, jax.jit, or eagerly for torch), and host-side
collectives of NumPy arrays for the callbacks, which run between steps whatever the backend."""

import keras
import numpy as np

from hoop import _hoop
from hoop._ops import Adasum, Average, Max, Min, Product, Sum

_OP_NAMES = {Average: "avg", Sum: "sum", Adasum: "adasum", Min: "min", Max: "max",
             Product: "prod"}
_CPU = -1  # hoop::kCpuDevice


def grouped_allreduce(tensors, op, prescale, postscale, process_set, name):
    """The backend's tensors reduced over the ranks as one group (one negotiation, fused)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import hoop.tensorflow as hvd  # noqa: PLC0415
        return hvd.grouped_allreduce(tensors, op=op, prescale_factor=prescale,
                                     postscale_factor=postscale, process_set=process_set,
                                     name=name)
    if backend == "jax":
        import hoop.jax as hvd  # noqa: PLC0415
        return hvd.grouped_allreduce(tensors, op=op, name=name, prescale_factor=prescale,
                                     postscale_factor=postscale, process_set=process_set)
    if backend == "torch":
        import hoop.torch as hvd  # noqa: PLC0415
        return hvd.grouped_allreduce(tensors, op=op, name=name, prescale_factor=prescale,
                                     postscale_factor=postscale, process_set=process_set)
    raise RuntimeError(f"hoop.keras: Keras backend {backend!r} is not supported (tensorflow, "
                       "jax and torch are)")


def _finish(handle):
    try:
        _hoop.wait(handle)
    finally:
        _hoop.release(handle)


def _host(value):
    """A C-ordered NumPy copy of `value`, of its shape (also a scalar's)."""
    return np.array(keras.ops.convert_to_numpy(value), order="C")


def allreduce_arrays(values, name, op=Average, process_set_id=0):
    """NumPy copies of `values` (numbers, arrays or backend tensors) reduced over the ranks."""
    arrays = [_host(v) for v in values]
    if not arrays:
        return []
    handle = _hoop.grouped_allreduce_async(
        [f"{name}.{i}" for i in range(len(arrays))], [a.ctypes.data for a in arrays],
        [a.ctypes.data for a in arrays], [a.dtype.name for a in arrays],
        [list(a.shape) for a in arrays], _OP_NAMES[op], 1.0, 1.0, process_set_id, _CPU)
    _finish(handle)
    return arrays


def broadcast_arrays(values, root, name, process_set_id=0):
    """NumPy copies of the set's rank `root`'s `values`, on every rank."""
    arrays = [_host(v) for v in values]
    handles = [_hoop.broadcast_async(f"{name}.{i}", a.ctypes.data, a.dtype.name, list(a.shape),
                                     root, process_set_id, _CPU)
               for i, a in enumerate(arrays)]
    for h in handles:
        _finish(h)
    return arrays


def broadcast_variables(variables, root, name, process_set_id=0):
    """Assigns the set's rank `root`'s values to the Keras variables on every rank."""
    for v, a in zip(variables, broadcast_arrays(variables, root, name, process_set_id)):
        v.assign(a)


def allgather_array(value, name, process_set_id=0):
    """The NumPy concatenation of every rank's `value` along the first dimension."""
    a = _host(value)
    if a.ndim == 0:
        a = a.reshape(1)
    handle = _hoop.allgather_async(name, a.ctypes.data, a.dtype.name, list(a.shape),
                                   process_set_id, _CPU)
    try:
        _hoop.wait(handle)
        out = np.empty(_hoop.output_shape(handle), dtype=a.dtype)
        _hoop.copy_output(handle, out.ctypes.data)
    finally:
        _hoop.release(handle)
    return out
