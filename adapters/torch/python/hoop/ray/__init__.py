"""hoop on a Ray cluster: horovod.ray's RayExecutor, over hoop.

    import ray
    from hoop.ray import RayExecutor

    ray.init()
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=30), num_workers=2)
    executor.start()
    results = executor.run(train, kwargs={"epochs": 1})   # train() uses hoop.torch as usual
    executor.shutdown()

The workers are Ray actors, placed by Ray (a placement group reserves their resources, as
Horovod does). Their ranks come from the nodes Ray chose: the workers of one node get
consecutive ranks, local ranks within the node and a cross rank per node. The rendezvous store
runs in the driver, and its secret reaches the workers through Ray. Inside `fn`, hoop.torch,
hoop.tensorflow, hoop.keras and hoop.jax start as they do under hooprun.

A worker whose process dies, or whose `fn` raises, fails run() and execute() on the driver
with a HoopError naming its rank and node; the other workers end with the cause (hoop's own
failure detection), and any still running after `failure_grace_s` are stopped, so nothing
hangs. The executor is then shut down, and start() begins again.

ElasticRayExecutor (hoop.ray.elastic) runs elastic training on the same kind of workers: a lost
worker is replaced and training goes on from the last commit.
"""

import time

from hoop._engines import (DriverStore, apply_env, end_hoop, grouped_by_host, host_layout,
                           one_interface)
from hoop._hoop import HoopError, HoopValueError

__all__ = ["ElasticRayExecutor", "RayExecutor", "Settings"]


class Settings:
    """RayExecutor.create_settings(): how long start() waits (timeout_s: the workers' hoop
    start and the rendezvous; placement_group_timeout_s: Ray reserving the resources) and the
    network interfaces hoop's TCP transport may use (nics: one name, as HOOP_IFACE)."""

    def __init__(self, timeout_s=30, placement_group_timeout_s=100, nics=None):
        """The settings the class describes; raises HoopValueError for a timeout <= 0 or
        more than one interface."""
        if timeout_s <= 0 or placement_group_timeout_s <= 0:
            raise HoopValueError("hoop.ray: timeout_s and placement_group_timeout_s must be > 0")
        nics = one_interface(nics, "hoop.ray")
        ## Seconds for the workers' hoop start and the rendezvous.
        self.timeout_s = timeout_s
        ## Seconds for Ray to reserve the workers' resources.
        self.placement_group_timeout_s = placement_group_timeout_s
        ## The network interfaces hoop's TCP transport may use: none, or one name.
        self.nics = nics


def _worker_class():
    import ray

    @ray.remote
    class HoopWorker:
        """One rank: where it runs, its hoop environment, and the calls it runs."""

        def __init__(self):
            self._executable = None

        def place(self):
            import os
            import socket

            ctx = ray.get_runtime_context()
            return {"node": ctx.get_node_id(), "ip": ray.util.get_node_ip_address(),
                    "hostname": socket.gethostname(), "pid": os.getpid()}

        def setup(self, env, executable_cls, args, kwargs):
            apply_env(env)
            if executable_cls is not None:
                self._executable = executable_cls(*args, **kwargs)

        def execute(self, fn):
            return _ending_hoop_on_failure(fn, self._executable)

        def run(self, fn, args, kwargs):
            return _ending_hoop_on_failure(fn, *args, **kwargs)

    return HoopWorker


def _ending_hoop_on_failure(fn, *args, **kwargs):
    """fn(*args, **kwargs); where it raises, hoop is shut down on this rank first, so that the
    other ranks' collectives fail at once naming it instead of waiting for their deadline."""
    try:
        return fn(*args, **kwargs)
    except BaseException:
        end_hoop()
        raise


class RayExecutor:
    """num_workers ranks as Ray actors (or num_hosts x num_workers_per_host, spread one host
    per bundle), each with cpus_per_worker CPUs and, with use_gpu, gpus_per_worker GPUs."""

    @staticmethod
    def create_settings(timeout_s=30, placement_group_timeout_s=100, nics=None):
        """Settings(timeout_s, placement_group_timeout_s, nics), as Horovod's."""
        return Settings(timeout_s, placement_group_timeout_s, nics)

    def __init__(self, settings=None, num_workers=None, num_hosts=None,
                 num_workers_per_host=1, cpus_per_worker=1, use_gpu=False,
                 gpus_per_worker=None, failure_grace_s=5.0):
        """An executor of the workers the class describes, started by start(); settings None:
        Settings()'s defaults. failure_grace_s: how long workers may still run after the first
        failure before they are stopped. Raises HoopValueError for an inconsistent layout."""
        if (num_workers is None) == (num_hosts is None):
            raise HoopValueError("hoop.ray: give num_workers, or num_hosts and "
                                 "num_workers_per_host")
        if num_hosts is not None:
            num_workers = num_hosts * num_workers_per_host
        if num_workers < 1 or cpus_per_worker < 0:
            raise HoopValueError(f"hoop.ray: num_workers={num_workers} must be >= 1 and "
                                 f"cpus_per_worker={cpus_per_worker} >= 0")
        if gpus_per_worker is not None and not use_gpu:
            raise HoopValueError("hoop.ray: gpus_per_worker needs use_gpu=True")
        ## The Settings start() uses.
        self.settings = settings or Settings()
        ## The number of workers (ranks).
        self.num_workers = num_workers
        ## The number of hosts, when the workers are spread one host per bundle; else None.
        self.num_hosts = num_hosts
        ## Workers per host, with num_hosts.
        self.num_workers_per_host = num_workers_per_host
        ## CPUs Ray reserves for each worker.
        self.cpus_per_worker = cpus_per_worker
        ## GPUs Ray reserves for each worker (0 without use_gpu).
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        ## Seconds workers may still run after the first failure before they are stopped.
        self.failure_grace_s = failure_grace_s
        self._workers = []
        self._places = []
        self._group = None
        self._store = None

    # -- start and stop ---------------------------------------------------------------------

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Starts the workers, gives each its rank from where Ray placed it, and builds
        executable_cls(*executable_args, **executable_kwargs) on each (the object execute()
        passes to its function)."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if self._workers:
            raise HoopValueError("hoop.ray: the executor has started already")
        if not ray.is_initialized():
            ray.init()
        per_bundle = self.num_workers_per_host if self.num_hosts else 1
        bundle = {"CPU": self.cpus_per_worker * per_bundle}
        if self.gpus_per_worker:
            bundle["GPU"] = self.gpus_per_worker * per_bundle
        bundles = [dict(bundle) for _ in range(self.num_hosts or self.num_workers)]
        self._group = placement_group(bundles,
                                      strategy="STRICT_SPREAD" if self.num_hosts else "PACK")
        ready = self._group.ready()
        done, _ = ray.wait([ready], timeout=self.settings.placement_group_timeout_s)
        if not done:
            self._release()
            raise HoopError(
                f"hoop.ray: Ray did not reserve {len(bundles)} x {bundle} within "
                f"{self.settings.placement_group_timeout_s} s (placement_group_timeout_s); "
                f"the cluster has {ray.available_resources()}")
        worker_cls = _worker_class()
        workers = []
        for i in range(self.num_workers):
            strategy = PlacementGroupSchedulingStrategy(
                self._group, placement_group_bundle_index=i // per_bundle)
            workers.append(worker_cls.options(
                num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                scheduling_strategy=strategy).remote())
        try:
            places = self._get([w.place.remote() for w in workers], "starting the workers",
                               timeout_s=self.settings.timeout_s, names=None)
        except BaseException:
            self._workers = workers
            self._release()
            raise
        order = grouped_by_host([p["node"] for p in places])
        self._workers = [workers[i] for i in order]
        self._places = [places[i] for i in order]
        self._store = DriverStore(ray.util.get_node_ip_address(), self.settings.timeout_s)
        layout = host_layout([p["node"] for p in self._places])
        extra = dict(extra_env_vars or {})
        self._get([w.setup.remote(self._store.worker_env(r, layout, extra, self.settings.nics),
                                  executable_cls,
                                  list(executable_args or []), dict(executable_kwargs or {}))
                   for r, w in enumerate(self._workers)], "setting the workers up")

    def shutdown(self):
        """Stops the workers and the store; the executor can start() again."""
        self._release()

    def _release(self):
        import ray

        for w in self._workers:
            ray.kill(w)
        self._workers = []
        self._places = []
        if self._group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self._group)
            self._group = None
        if self._store is not None:
            self._store.stop()
            self._store = None

    # -- calls ------------------------------------------------------------------------------

    def run(self, fn, args=None, kwargs=None):
        """fn(*args, **kwargs) on every worker; the results in rank order."""
        return self._get(self.run_remote(fn, args, kwargs), "run")

    def run_remote(self, fn, args=None, kwargs=None):
        """As run(), returning the workers' Ray object references (rank order) at once."""
        self._check_started()
        return [w.run.remote(fn, list(args or []), dict(kwargs or {})) for w in self._workers]

    def execute(self, fn):
        """fn(executable) on every worker (start()'s executable_cls object, or None); the
        results in rank order."""
        self._check_started()
        return self._get([w.execute.remote(fn) for w in self._workers], "execute")

    def execute_single(self, fn):
        """fn(executable) on rank 0 only; its result."""
        self._check_started()
        return self._get([self._workers[0].execute.remote(fn)], "execute_single")[0]

    def nodes(self):
        """The IP address of each rank's node, in rank order."""
        self._check_started()
        return [p["ip"] for p in self._places]

    def _check_started(self):
        if not self._workers:
            raise HoopValueError("hoop.ray: start() the executor first")

    def _where(self, rank):
        if not self._places:
            return f"worker {rank}"
        p = self._places[rank]
        return f"rank {rank} (node {p['ip']}, host {p['hostname']}, pid {p['pid']})"

    def _get(self, refs, what, timeout_s=None, names=True):
        """The results of `refs` (one per rank, in order). The first failure raises, naming its
        rank; the other ranks get failure_grace_s to end with the cause, then are stopped."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        where = self._where if names else (lambda r: f"worker {r}")
        pending = {ref: r for r, ref in enumerate(refs)}
        results = [None] * len(refs)
        died, raised = {}, {}
        start = time.monotonic()
        failed_at = None
        while pending:
            now = time.monotonic()
            if failed_at is not None and now - failed_at > self.failure_grace_s:
                break
            if timeout_s is not None and now - start > timeout_s:
                self._release()
                raise HoopError(f"hoop.ray: {what}: {', '.join(where(r) for r in pending.values())}"
                                f" did not answer within {timeout_s} s")
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                r = pending.pop(ref)
                try:
                    results[r] = ray.get(ref)
                except RayActorError as e:
                    died[r] = _first_line(e)
                except RayTaskError as e:
                    raised[r] = (isinstance(getattr(e, "cause", None), HoopError),
                                 _cause_line(e))
                except GetTimeoutError:
                    pending[ref] = r
                if (died or raised) and failed_at is None:
                    failed_at = time.monotonic()
        if not died and not raised:
            return results
        stopped = sorted(pending.values())
        # The root cause first: a worker that died, then one whose own code raised, then the
        # HoopErrors of the others (which name the first two).
        lines = [f"{where(r)} died: {msg}" for r, msg in sorted(died.items())]
        lines += [f"{where(r)} raised: {msg}"
                  for r, (_, msg) in sorted(raised.items(), key=lambda kv: (kv[1][0], kv[0]))]
        if stopped:
            lines.append(f"{', '.join(where(r) for r in stopped)} still running after "
                         f"{self.failure_grace_s} s: stopped")
        self._release()
        raise HoopError(f"hoop.ray: {what} failed: " + "; ".join(lines))


def _first_line(e):
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _cause_line(e):
    """The exception a task raised, as 'Type: first line' (a RayTaskError wraps it)."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        text = str(cause).strip()
        return f"{type(cause).__name__}: {text.splitlines()[0]}" if text else type(cause).__name__
    return _first_line(e)


# Last: the elastic executor uses this module's worker actor and error lines.
from hoop.ray.elastic import ElasticRayExecutor  # noqa: E402
