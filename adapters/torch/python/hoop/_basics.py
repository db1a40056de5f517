"""Job-level functions every hoop framework adapter shares: joining and leaving the job, who
this rank is, the timeline and what this build supports. Names and meanings follow Horovod's
horovod.common.basics; hoop.torch and hoop.tensorflow re-export them."""

import atexit
import os
import warnings

from hoop import _hoop
from hoop import _process_sets as _sets
from hoop._ops import Average, Sum


def handle_average_backwards_compatibility(op, average):
    """Resolves horovod's deprecated `average` flag against `op` (op wins; both is an error)."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. "
                             "Please provide only one of them.")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning, stacklevel=3)
        return Average if average else Sum
    return Average


def init(comm=None, process_sets=None, adapter="hoop", on_start=None):
    """Joins the job the launcher (hooprun, mpirun, Slurm) described.

    comm: accepted for horovod compatibility; hoop does not use MPI communicators, so it must
        be None (or an empty list).
    process_sets: ProcessSet objects to register right away, or "dynamic" (every set in hoop
        can be added later anyway).
    adapter, on_start: the calling adapter's name for errors, and what it does before the
        runtime starts afresh (restarting its generated names).
    """
    if comm:
        raise ValueError(f"{adapter}.init: MPI communicators are not supported (comm must be None)")
    if not _hoop.is_initialized():
        # Auto-generated names restart with the job so that every rank counts from the same
        # point, including after shutdown() and a new init().
        if on_start is not None:
            on_start()
        _hoop.init()
        _shut_down_at_exit()
    _sets.setup_global()
    if process_sets is not None and process_sets != "dynamic":
        for ps in process_sets:
            _sets.add_process_set(ps)


_exit_registered = False


def _shut_down_at_exit():
    """A script that ends without shutdown(), as most Horovod scripts do, leaves the job as
    shutdown() would (Horovod's atexit): the peers see an orderly end, not a lost rank. Here,
    before the interpreter finalizes, rather than in libhoop's own exit handler, so that no
    runtime thread meets a half-finalized interpreter."""
    global _exit_registered
    if not _exit_registered:
        atexit.register(lambda: _hoop.shutdown() if _hoop.is_initialized() else None)
        _exit_registered = True


def shutdown(on_stop=None):
    """Finishes the work in flight on every rank and leaves the job; then runs the adapter's
    on_stop (only now is no tensor of an unsynchronized handle in use any more)."""
    _hoop.shutdown()
    if on_stop is not None:
        on_stop()
    _sets.invalidate_all()


def start_timeline(file_path, mark_cycles=False):
    """Starts writing the timeline (a Chrome trace of every tensor's phases) to file_path:
    rank 0 writes it, or each rank its own file where the path contains "%r". Call it on every
    rank; with HOROVOD_TIMELINE=DYNAMIC (or HOOP_TIMELINE=DYNAMIC) no timeline is written
    before. mark_cycles: mark each cycle of the background thread too."""
    _hoop.start_timeline(str(file_path), bool(mark_cycles))


def stop_timeline():
    """Stops writing the timeline; the file stays a complete trace."""
    _hoop.stop_timeline()


is_initialized = _hoop.is_initialized
rank = _hoop.rank
size = _hoop.size
local_rank = _hoop.local_rank
local_size = _hoop.local_size
cross_rank = _hoop.cross_rank
cross_size = _hoop.cross_size


def is_homogeneous():
    """Whether every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


# What this build was made with. hoop runs its own transports; of horovod's optional backends
# MPI (a transport), CUDA and NCCL can exist here, as the build found them.
def mpi_threads_supported():
    return False


def mpi_enabled():
    """Whether this job's ranks talk over MPI (HOOP_TRANSPORT=mpi, under mpirun)."""
    return mpi_built() and os.environ.get("HOOP_TRANSPORT", "").strip().lower() == "mpi"


def mpi_built():
    """Whether this build has the MPI transport."""
    return _hoop.mpi_built()


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    """NCCL_VERSION_CODE of the NCCL this build's device backend has (2.21.5: 22105), 0
    without one: Horovod returns the same, and scripts compare it with a version."""
    return _hoop.nccl_built()


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return _hoop.cuda_built()


def rocm_built():
    return False
