"""What hoop.ray and hoop.spark share: the job's rendezvous store, served from the driver, and
each worker's hoop environment, made from the hosts the engine placed the workers on.

A worker joins the job as one that hooprun started would: the variables below are the ones
hooprun sets (HOOP_RANK, HOOP_SIZE, the local and cross layout, the store's address, the job
id and secret). The secret reaches the workers through the engine (an actor call, a task's
closure), never on a command line.
"""

import os
import secrets
import socket
import uuid


class DriverStore:
    """A rendezvous store served from this process for one job of `size` workers."""

    def __init__(self, address, timeout_s, bind="0.0.0.0"):
        from hoop._hoop import StoreHost

        self.address = address
        self.timeout_s = timeout_s
        self.secret = secrets.token_hex(16)
        self.job_id = "hoop-" + uuid.uuid4().hex[:16]
        self._host = StoreHost(bind, self.secret, self.job_id, float(timeout_s))
        self.port = self._host.port

    def job_env(self, extra=None, nics=None):
        """What every worker of the job is given: the store's address, the job id and secret,
        the store's timeout as the workers' start timeout and the one interface of `nics`
        (HOOP_IFACE), then `extra`, which wins."""
        env = {
            "HOOP_RENDEZVOUS_ADDR": self.address,
            "HOOP_RENDEZVOUS_PORT": str(self.port),
            "HOOP_JOB_ID": self.job_id,
            "HOOP_SECRET": self.secret,
            "HOOP_START_TIMEOUT": str(int(self.timeout_s)),
        }
        if nics:
            env["HOOP_IFACE"] = nics[0]
        env.update(extra or {})
        return env

    def worker_env(self, rank, layout, extra=None, nics=None):
        """The environment of the worker of rank `rank`; layout is host_layout()'s."""
        return dict(self.job_env(extra, nics), **layout_env(rank, layout))

    def stop(self):
        self._host.stop()


def host_layout(hosts):
    """(local_rank, local_size, cross_rank, cross_size) of each rank, hosts[r] naming rank r's
    host: the local rank counts the host's earlier ranks, the cross rank numbers the hosts in
    the order their first rank comes."""
    order = {}
    for h in hosts:
        order.setdefault(h, len(order))
    counts = {h: hosts.count(h) for h in order}
    seen = {}
    out = []
    for h in hosts:
        local = seen.get(h, 0)
        seen[h] = local + 1
        out.append((local, counts[h], order[h], len(order)))
    return out


def layout_env(rank, layout):
    """The rank layout variables of rank `rank` (hooprun's); layout is host_layout()'s."""
    local_rank, local_size, cross_rank, cross_size = layout[rank]
    return {
        "HOOP_RANK": str(rank),
        "HOOP_SIZE": str(len(layout)),
        "HOOP_LOCAL_RANK": str(local_rank),
        "HOOP_LOCAL_SIZE": str(local_size),
        "HOOP_CROSS_RANK": str(cross_rank),
        "HOOP_CROSS_SIZE": str(cross_size),
    }


def grouped_by_host(hosts):
    """The workers' indices in rank order: each host's workers together, hosts in the order of
    their first worker, workers of a host in their own order (ranks of one host are
    consecutive, as hooprun numbers them)."""
    order = {}
    for h in hosts:
        order.setdefault(h, len(order))
    return sorted(range(len(hosts)), key=lambda i: (order[hosts[i]], i))


def apply_env(env, drop=()):
    """Sets `env` in this worker process before hoop starts in it (hoop reads the variables at
    init), and removes the variables named in `drop`."""
    for name in drop:
        os.environ.pop(name, None)
    os.environ.update({k: str(v) for k, v in env.items()})


def this_host():
    return socket.gethostname()


def one_interface(nics, engine):
    """nics as a list: none, or the one interface hoop's TCP transport binds (HOOP_IFACE);
    raises HoopValueError naming `engine` for more."""
    from hoop._hoop import HoopValueError

    nics = list(nics or [])
    if len(nics) > 1:
        raise HoopValueError(
            f"{engine}: nics={nics}: hoop's TCP transport binds one interface (HOOP_IFACE)")
    return nics


def end_hoop():
    """Shuts hoop down in this worker where it is running: after a failure, so the other ranks'
    collectives fail at once naming this one, and at a task's end, since the engine may reuse the
    process. A shutdown that fails (the job is broken already) is not the news: the caller's
    own outcome is."""
    from hoop import _hoop

    if _hoop.is_initialized():
        try:
            _hoop.shutdown()
        except Exception:
            pass
