"""Job-level functions of hoop.torch: joining and leaving the job, who this rank is, the
reduction ops and what this build supports. Names and meanings follow horovod.torch."""

from hoop import _basics
from hoop._basics import (ccl_built, cross_rank, cross_size, cuda_built,  # noqa: F401
                          ddl_built, gloo_built, gloo_enabled,
                          handle_average_backwards_compatibility, is_homogeneous,
                          is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                          mpi_threads_supported, nccl_built, rank, rocm_built, size,
                          start_timeline, stop_timeline)
from hoop.torch import handles

# Horovod's reduce-op values; Adasum also in DistributedOptimizer, where it combines each
# rank's model update (see adasum_optimizer.py).
from hoop._ops import Adasum, Average, Max, Min, Product, Sum  # noqa: F401

_OP_NAMES = {Average: "avg", Sum: "sum", Adasum: "adasum", Min: "min", Max: "max",
             Product: "prod"}


def op_name(op):
    """The runtime's name of a horovod reduce-op value."""
    try:
        return _OP_NAMES[op]
    except (KeyError, TypeError):
        raise ValueError(
            f"unsupported reduce op {op!r}: hoop.torch offers Average, Sum, Adasum, Min, Max "
            "and Product") from None


def init(comm=None, process_sets=None):
    """Joins the job the launcher (hooprun, mpirun, Slurm) described.

    comm: accepted for horovod compatibility; hoop does not use MPI communicators, so it must
        be None (or an empty list).
    process_sets: ProcessSet objects to register right away, or "dynamic" (every set in hoop
        can be added later anyway).
    """
    _basics.init(comm, process_sets, "hoop.torch", handles.reset_names)


def shutdown():
    """Finishes the work in flight on every rank and leaves the job."""
    _basics.shutdown(handles.forget_all)
