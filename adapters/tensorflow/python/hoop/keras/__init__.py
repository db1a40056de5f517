"""hoop.keras (also hoop.tensorflow.keras): horovod.tensorflow.keras for Keras 3, on the
TensorFlow, JAX or torch backend.

    import hoop.keras as hvd
    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size())),
                  loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()])

DistributedOptimizer averages the gradients over the ranks inside the backend's compiled train
step (one grouped, fused allreduce through hoop.tensorflow, hoop.jax or hoop.torch) before the
wrapped optimizer applies them. The callbacks run between steps on host copies.
"""

import keras

from hoop import HoopError, HoopValueError, _basics, _gradients, _hoop
from hoop._basics import (cross_rank, cross_size, is_initialized, local_rank,  # noqa: F401
                          local_size, rank, size, start_timeline, stop_timeline)
from hoop._compression import HalfCompressor, NoneCompressor
from hoop._ops import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from hoop._process_sets import (ProcessSet, add_process_set, global_process_set,  # noqa: F401
                                remove_process_set, root_in_set, set_id)
from hoop.keras import _backend, callbacks  # noqa: F401


class _FP16Compressor(HalfCompressor):
    """Floating-point gradients travel as float16 (keras.ops: any backend; a sparse gradient
    as it is)."""

    @staticmethod
    def wider_float(tensor):
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        return ("float" in dtype and dtype != "float16"
                and type(tensor).__name__ != "IndexedSlices")

    @staticmethod
    def cast(tensor, dtype):
        return keras.ops.cast(tensor, dtype or "float16")


class Compression:
    """The available compressors: Compression.none and Compression.fp16."""

    ## Sends tensors as they are.
    none = NoneCompressor
    ## Sends floating-point tensors as float16.
    fp16 = _FP16Compressor


def init(comm=None, process_sets=None):
    """Joins the job the launcher (hooprun, mpirun, Slurm) described."""
    on_start = None
    if keras.backend.backend() == "tensorflow":
        from hoop.tensorflow import mpi_ops  # noqa: PLC0415
        on_start = mpi_ops.reset_names
    _basics.init(comm, process_sets, "hoop.keras", on_start)


def shutdown():
    """Finishes the work in flight on every rank and leaves the job."""
    _basics.shutdown()


def _reduce(optimizer, grads, variables):
    """The gradients of one step, reduced over the ranks as the optimizer's settings say."""
    s = optimizer._hoop_settings
    compression = s["compression"]

    def grouped(tensors, op, prescale, postscale, name):
        if s["sparse_as_dense"] and keras.backend.backend() == "tensorflow":
            import tensorflow as tf  # noqa: PLC0415
            tensors = [tf.convert_to_tensor(t) for t in tensors]
        packed = [compression.compress(t) for t in tensors]
        reduced = _backend.grouped_allreduce([c for c, _ in packed], op, prescale, postscale,
                                             s["process_set"], name)
        return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, packed)]

    return _gradients.reduce_gradients(grads, variables, grouped, s["op"],
                                       s["gradient_predivide_factor"], s["num_groups"],
                                       s["groups"], s["name"])


def _distributed_class(base, settings):
    """A subclass of the Keras optimizer class `base` whose apply() reduces the gradients
    first. It keeps the class's name and module, so a saved model names the plain optimizer."""
    def apply(self, grads, trainable_variables=None):
        variables = trainable_variables
        if variables is None:
            variables = getattr(self, "_trainable_variables", None)
        grads = _reduce(self, list(grads), list(variables) if variables is not None else None)
        return base.apply(self, grads, trainable_variables)

    return type(base.__name__, (base,), {"apply": apply, "__module__": base.__module__,
                                         "_hoop_settings": settings})


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set):
    """A copy of the Keras 3 `optimizer` (same class and configuration) that applies the
    gradients averaged over the ranks (op), in grouped fused allreduces.

    backward_passes_per_step > 1 accumulates that many steps' gradients before an update
    (Keras 3's gradient_accumulation_steps, which averages them: average_aggregated_gradients
    is therefore always true); the gradients are reduced every step. device_dense and
    device_sparse are accepted for Horovod compatibility."""
    del device_dense, device_sparse, average_aggregated_gradients
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError("hoop.keras.DistributedOptimizer wraps a Keras 3 optimizer, not "
                        f"{type(optimizer).__name__}")
    set_id(process_set)
    settings = dict(compression=compression, sparse_as_dense=sparse_as_dense, op=op,
                    gradient_predivide_factor=gradient_predivide_factor,
                    num_groups=num_groups, groups=groups, process_set=process_set,
                    name=name or "keras.gradients")
    config = optimizer.get_config()
    if backward_passes_per_step > 1:
        config["gradient_accumulation_steps"] = int(backward_passes_per_step)
    return _distributed_class(type(optimizer), settings).from_config(config)


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, **kwargs):
    """keras.models.load_model, with the saved optimizer made a DistributedOptimizer."""
    settings = dict(compression=compression, sparse_as_dense=False, op=Average,
                    gradient_predivide_factor=1.0, num_groups=0, groups=None,
                    process_set=global_process_set, name="keras.gradients")
    classes = [c for c in vars(keras.optimizers).values()
               if isinstance(c, type) and issubclass(c, keras.optimizers.Optimizer)]
    classes += list(custom_optimizers or [])
    objects = {c.__name__: _distributed_class(c, settings) for c in classes}
    objects.update(custom_objects or {})
    return keras.models.load_model(filepath, custom_objects=objects, **kwargs)


def allreduce(value, name=None, average=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """A NumPy copy of `value` reduced over the ranks (Average by default), between steps."""
    op = _basics.handle_average_backwards_compatibility(op, average)
    out = _backend.allreduce_arrays([value], name or "keras.allreduce", op,
                                    set_id(process_set))[0]
    scale = prescale_factor * postscale_factor
    return out * scale if scale != 1 else out


def allgather(value, name=None, process_set=global_process_set):
    """A NumPy concatenation of every rank's `value` along the first dimension."""
    return _backend.allgather_array(value, name or "keras.allgather", set_id(process_set))


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    """A NumPy copy of the root rank's `value`."""
    return _backend.broadcast_arrays([value], root_in_set(process_set, root_rank),
                                     name or "keras.broadcast", set_id(process_set))[0]


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called it."""
    _hoop.barrier(set_id(process_set))


def broadcast_global_variables(root_rank, model=None):
    """Broadcasts a model's variables and its optimizer's from the root rank (Keras 3 has no
    global variables: pass the model)."""
    if model is None:
        raise ValueError("hoop.keras.broadcast_global_variables needs the model (Keras 3 keeps "
                         "no global variables)")
    variables = list(model.variables)
    if getattr(model, "optimizer", None) is not None and model.optimizer.built:
        variables += list(model.optimizer.variables)
    _backend.broadcast_variables(variables, root_in_set(global_process_set, root_rank),
                                 "keras.global_variables", 0)


__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "DistributedOptimizer", "load_model", "callbacks",
    "Compression", "allreduce", "allgather", "broadcast", "barrier",
    "broadcast_global_variables",
    "ProcessSet", "add_process_set", "remove_process_set", "global_process_set",
    "start_timeline", "stop_timeline", "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "HoopError", "HoopValueError",
]
