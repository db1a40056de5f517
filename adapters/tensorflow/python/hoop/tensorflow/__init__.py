"""hoop.tensorflow: a drop-in for horovod.tensorflow (import hoop.tensorflow as hvd).

    import hoop.tensorflow as hvd
    hvd.init()
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)        # gradients averaged over the ranks
    grads = tape.gradient(loss, model.trainable_variables)
    hvd.broadcast_variables(model.variables, root_rank=0)

Each collective is a TensorFlow op (libhoop_tensorflow.so, built against the installed
TensorFlow's headers): it runs eagerly and inside tf.function, asynchronously through hoop's
runtime (negotiation, fusion of the collectives in flight together, the response cache, the
timeline, process sets), with Horovod's gradients. CPU tensors only. Keras 3 models use
hoop.keras (also importable as hoop.tensorflow.keras).
"""

from hoop import HoopError, HoopValueError, _basics
from hoop._basics import (ccl_built, cross_rank, cross_size, cuda_built,  # noqa: F401
                          ddl_built, gloo_built, gloo_enabled, is_homogeneous, is_initialized,
                          local_rank, local_size, mpi_built, mpi_enabled,
                          mpi_threads_supported, nccl_built, rank, rocm_built, size,
                          start_timeline, stop_timeline)
from hoop._ops import Adasum, Average, Max, Min, Product, Sum  # noqa: F401
from hoop._process_sets import (ProcessSet, add_process_set, global_process_set,  # noqa: F401
                                remove_process_set)
from hoop.tensorflow import mpi_ops as _mpi_ops
from hoop.tensorflow.compression import Compression  # noqa: F401
from hoop.tensorflow.functions import (allgather_object, broadcast_global_variables,  # noqa
                                       broadcast_object, broadcast_variables)
from hoop.tensorflow.gradient_tape import (DistributedGradientTape,  # noqa: F401
                                           DistributedOptimizer)
from hoop.tensorflow.mpi_ops import (allgather, allreduce, alltoall, barrier,  # noqa: F401
                                     broadcast, grouped_allreduce, join, reducescatter)

## Horovod's exception name, for scripts that catch it.
HorovodInternalError = HoopError


def init(comm=None, process_sets=None):
    """Joins the job the launcher (hooprun, mpirun, Slurm) described.

    comm: accepted for horovod compatibility; it must be None. process_sets: ProcessSet
    objects to register right away, or "dynamic".
    """
    _basics.init(comm, process_sets, "hoop.tensorflow", _mpi_ops.reset_names)


def shutdown():
    """Finishes the work in flight on every rank and leaves the job."""
    _basics.shutdown()


__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "is_homogeneous", "allreduce", "grouped_allreduce",
    "allgather", "broadcast", "alltoall", "reducescatter", "join", "barrier",
    "broadcast_variables", "broadcast_global_variables", "broadcast_object", "allgather_object",
    "DistributedGradientTape", "DistributedOptimizer", "Compression", "ProcessSet",
    "add_process_set", "remove_process_set", "global_process_set", "start_timeline",
    "stop_timeline", "Average", "Sum", "Adasum", "Min", "Max", "Product", "HoopError",
    "HoopValueError", "HorovodInternalError",
]
