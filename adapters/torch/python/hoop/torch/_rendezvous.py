"""torch.distributed's default rendezvous (``env://``) under hoop's launchers.

torchrun sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE; hooprun (and mpirun, srun, a
Kubernetes Indexed Job, which hoop's bootstrap reads) set other variables. Where torch's are
missing and hoop's describe a job, ``init_process_group`` with no ``init_method`` meets through
the job's hoop store instead (hooprun's, or the one rank 0 hosts under the other launchers),
with hoop's rank and size, so that ``dist.init_process_group("hoop")`` (or ``"gloo"``) needs no
more under ``hooprun -np N python train.py``. With torch's variables set, torch's handler runs
as before.
"""

import importlib
import os
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import torch.distributed as dist

# The module (torch.distributed's attribute of that name is its function rendezvous()).
_torch_rendezvous = importlib.import_module("torch.distributed.rendezvous")

from hoop import _hoop

_TORCH_VARIABLES = ("MASTER_ADDR", "MASTER_PORT")
# The stores handed to torch, alive as long as the process: torch keeps only the C++ half of a
# Python store, and once the Python half is gone it can no longer call its methods.
_stores = []


class JobStore(dist.Store):
    """A c10d store over the hoop job's store, under its keys "torch/...": gloo's and hoop's
    process groups, and init_process_group's barrier, use it like a TCPStore."""

    def __init__(self, timeout):
        super().__init__()
        self._store = _hoop.JobStore(timeout.total_seconds())

    @property
    def rank(self):
        return self._store.rank

    @property
    def size(self):
        return self._store.size

    def set(self, key, value):
        self._store.set(key, value if isinstance(value, bytes) else str(value).encode())

    def get(self, key):
        return self._store.get(key)

    def add(self, key, value):
        return self._store.add(key, value)

    def wait(self, keys, timeout=None):
        self._store.wait(list(keys), timeout.total_seconds() if timeout is not None else -1.0)

    def delete_key(self, key):
        return self._store.remove(key)


def _hoop_handler(url, layout, timeout):
    query = {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}
    for name, ours in (("rank", layout["rank"]), ("world_size", layout["size"])):
        if name in query and int(query[name]) != ours:
            raise ValueError(
                f"init_process_group: {name}={query[name]}, but hoop's launcher "
                f"({layout['launcher']}) started this process as {name} {ours}; leave it out, "
                f"or set MASTER_ADDR and MASTER_PORT for torch's own env:// rendezvous")
    store = JobStore(timeout)
    _stores.append(store)
    yield store, store.rank, store.size
    raise RuntimeError("env:// under hoop's launcher cannot meet again: start a new job")


def _make_handler(torch_handler):
    def handler(url, timeout=timedelta(minutes=30), **kwargs):
        if all(os.environ.get(v) for v in _TORCH_VARIABLES):
            return torch_handler(url, timeout=timeout, **kwargs)
        layout = _hoop.job_layout()
        if layout["launcher"] == "none":
            # Not under a launcher hoop knows: torch's error names the missing variable.
            return torch_handler(url, timeout=timeout, **kwargs)
        return _hoop_handler(url, layout, timeout)

    handler.hoop = True
    return handler


def install():
    """Makes env:// fall back to the hoop job's store; once per process."""
    # torch keeps its handlers in a module dict and refuses to register "env" twice, so the
    # fallback wraps the registered handler in place.
    handlers = getattr(_torch_rendezvous, "_rendezvous_handlers", None)
    if handlers is None or "env" not in handlers or getattr(handlers["env"], "hoop", False):
        return
    handlers["env"] = _make_handler(handlers["env"])
