"""Process sets: subsets of the job's ranks with their own collectives (horovod's
horovod.common.process_sets API over the runtime's integer set ids), shared by hoop.torch,
hoop.tensorflow and hoop.keras: one runtime, one registry of sets."""

from hoop import _hoop

_GLOBAL_ID = 0


class ProcessSet:
    """Global ranks that run collectives among themselves.

    A set is usable once registered, by hvd.add_process_set(set) or hvd.init(process_sets=...);
    until then process_set_id is None. Every rank of the job must register the same sets in
    the same order, members or not. An empty list of ranks means every rank of the job, as in
    horovod: registering fills .ranks in.
    """

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)
        # Remembered apart from .ranks, which registration fills in, so that registering the
        # set again after shutdown() and init() takes the job's ranks of that time.
        self._whole_job = not self.ranks
        self.process_set_id = None
        # Horovod's MPI communicator slot, kept so code printing or checking it still runs.
        self.mpi_comm = None

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set; None while unregistered."""
        if self.process_set_id is None:
            return None
        return len(_hoop.process_set_ranks(self.process_set_id))

    def rank(self):
        """This rank's place in the set (-1 when not a member); None while unregistered."""
        if self.process_set_id is None:
            return None
        return _hoop.process_set_rank(self.process_set_id)

    def included(self):
        """Whether this rank belongs to the set; None while unregistered."""
        if self.process_set_id is None:
            return None
        return _hoop.process_set_rank(self.process_set_id) >= 0

    def __str__(self):
        return (f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks}, "
                f"mpi_comm={self.mpi_comm})")

    __repr__ = __str__


# Every rank of the job; its ranks are filled in by init().
global_process_set = ProcessSet([])
global_process_set.process_set_id = _GLOBAL_ID

# Registered sets by id, so shutdown() can mark them unusable.
_registered = {}


def setup_global():
    """Fills in the global set's ranks once the job is joined."""
    global_process_set.process_set_id = _GLOBAL_ID
    global_process_set.ranks = list(_hoop.process_set_ranks(_GLOBAL_ID))


def invalidate_all():
    """Forgets every registered set: their ids die with the runtime at shutdown."""
    for ps in _registered.values():
        ps._invalidate()
    _registered.clear()


def add_process_set(process_set):
    """Registers a ProcessSet, or a list of global ranks, on every rank; returns the set. An
    empty list registers a set of every rank of the job (apart from the global set)."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    elif process_set.process_set_id is not None:
        raise ValueError(f"{process_set} has already been added")
    ranks = list(range(_hoop.size())) if process_set._whole_job else process_set.ranks
    process_set.process_set_id = _hoop.add_process_set(ranks)
    process_set.ranks = ranks
    _registered[process_set.process_set_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes a registered set on every rank. False for the global set or an unknown one."""
    set_id = process_set.process_set_id
    if set_id is None or set_id == _GLOBAL_ID:
        return False
    _hoop.remove_process_set(set_id)
    _registered.pop(set_id, None)
    process_set._invalidate()
    return True


def set_id(process_set):
    """The runtime id of a registered set; a clear error for anything else."""
    if not isinstance(process_set, ProcessSet):
        raise TypeError("process_set must be a hoop ProcessSet (hvd.ProcessSet), "
                        f"not {type(process_set).__name__}")
    if process_set.process_set_id is None:
        raise ValueError(f"{process_set} is not registered: call hvd.add_process_set() first")
    return process_set.process_set_id


def root_in_set(process_set, root_rank):
    """Horovod names a broadcast's root by its global rank; the runtime by its place in the set."""
    if set_id(process_set) == _GLOBAL_ID:
        return int(root_rank)
    if root_rank not in process_set.ranks:
        raise ValueError(f"root_rank {root_rank} is not a member of {process_set}")
    return process_set.ranks.index(root_rank)
