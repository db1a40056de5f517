"""hoop.ray.ElasticRayExecutor: horovod.ray's elastic executor, over hoop's elastic rounds.

    import ray
    from hoop.ray import ElasticRayExecutor

    ray.init()
    settings = ElasticRayExecutor.create_settings(min_np=1, max_np=4)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    results = executor.run(train)   # train() uses hvd.elastic.run, as under hooprun
    executor.shutdown()

The driver does here what hooprun's elastic driver does for --host-discovery-script: the
slots are the alive Ray nodes' CPUs (and GPUs, with use_gpu) divided by what a slot takes, a
worker is a Ray actor pinned to a node, and each change of the workers is a new round in the
store the driver serves (rendezvous.h): ranks grouped by node, rank 0 always a worker of the
previous round, so the state it broadcasts is a committed one.

A worker whose process dies (an actor killed, a node lost) is replaced on a free slot: the
survivors' collectives fail, they restore their last commit and, with the new worker, go on in
the next round. A worker that stops answering (stopped, hung) is found as hooprun finds it: the
others report the failed round, and one that neither reported it nor joined a later round
within their HOOP_TIMEOUT_SECONDS is killed and replaced. A worker that dies before it ever
joined a round puts its node on a blacklist (the node cannot start workers). A function that
raises fails run() at once, naming the rank, node and cause: elastic.run has already handled
what a reset can cure. When a worker's function returns, the job is ending: no new round starts,
and run() returns the results of the last round in rank order once every worker has returned.
"""

import sys
import time

from hoop._engines import DriverStore, apply_env, one_interface
from hoop._hoop import ElasticRounds, HoopError, HoopValueError
# hoop.ray imports this module last, once these are defined.
from hoop.ray import _cause_line, _first_line, _worker_class

__all__ = ["ElasticRayExecutor", "ElasticSettings"]

_TICK_S = 0.2
_DISCOVERY_S = 1.0
# How many recent rounds the driver looks at for failure reports (as hooprun).
_REPORTED_ROUNDS = 3


class ElasticSettings:
    """ElasticRayExecutor.create_settings(): the fewest and most workers, how many resets the
    job may take (None: any), how long it waits for min_np slots and a worker for its round
    (elastic_timeout, HOOP_ELASTIC_TIMEOUT), the workers' hoop start (timeout_s), one network
    interface for hoop's TCP transport (nics) and whether the driver prints each round."""

    def __init__(self, min_np=1, max_np=None, reset_limit=None, elastic_timeout=600,
                 timeout_s=30, nics=None, verbose=1):
        """The settings the class describes; raises HoopValueError for inconsistent ones."""
        if min_np < 1 or (max_np is not None and max_np < min_np):
            raise HoopValueError(f"hoop.ray: min_np={min_np} must be >= 1 and "
                                 f"max_np={max_np} >= min_np")
        if elastic_timeout <= 0 or timeout_s <= 0:
            raise HoopValueError("hoop.ray: elastic_timeout and timeout_s must be > 0")
        if reset_limit is not None and reset_limit < 0:
            raise HoopValueError(f"hoop.ray: reset_limit={reset_limit} must be >= 0")
        nics = one_interface(nics, "hoop.ray")
        ## The fewest workers the job runs with; below it, it waits for slots.
        self.min_np = min_np
        ## The most workers (None: every slot).
        self.max_np = max_np
        ## The most resets (new rounds after the first) before the job fails; None: no limit.
        self.reset_limit = reset_limit
        ## Seconds to wait for min_np slots, and a worker's wait for its round.
        self.elastic_timeout = elastic_timeout
        ## Seconds for a worker's hoop start.
        self.timeout_s = timeout_s
        ## The network interfaces hoop's TCP transport may use: none, or one name.
        self.nics = nics
        ## Whether the driver prints a line per round and per lost worker (stderr).
        self.verbose = verbose


class _Worker:
    """One actor of the job, across the rounds it takes part in."""

    def __init__(self, serial, node, slot):
        self.serial = serial
        self.node = node  # ray.nodes()'s entry
        self.slot = slot
        self.id = f"{serial}@{node['NodeManagerAddress']}:{slot}"
        self.actor = None
        self.ref = None
        self.ranks = {}  # round -> rank
        self.rank = -1
        self.first_round = -1
        self.running = True
        self.removed = False
        self.result = None
        self.finished = False

    def where(self):
        return (f"worker {self.serial} (rank {self.rank}, node {self.node['NodeManagerAddress']},"
                f" host {self.node['NodeManagerHostname']})")


class ElasticRayExecutor:
    """Elastic workers on a Ray cluster: one per slot of cpus_per_slot CPUs (and gpus_per_slot
    GPUs with use_gpu), between the settings' min_np and max_np; env_vars are set in every
    worker."""

    @staticmethod
    def create_settings(min_np=1, max_np=None, reset_limit=None, elastic_timeout=600,
                        timeout_s=30, nics=None, verbose=1):
        """ElasticSettings(...) as the class describes them, with Horovod's names."""
        return ElasticSettings(min_np, max_np, reset_limit, elastic_timeout, timeout_s, nics,
                               verbose)

    def __init__(self, settings=None, use_gpu=False, cpus_per_slot=1, gpus_per_slot=None,
                 env_vars=None, override_discovery=True, failure_grace_s=5.0):
        """An executor of the job the class describes, started by start(). Discovery is always
        the Ray cluster's nodes (override_discovery=False has nothing else to fall back on).
        failure_grace_s: how long the other workers may run after one's function raised before
        they are stopped."""
        if not override_discovery:
            raise HoopValueError("hoop.ray: override_discovery=False: the slots can only come "
                                 "from the Ray cluster's nodes")
        if cpus_per_slot < 0 or (use_gpu and (gpus_per_slot or 1) <= 0):
            raise HoopValueError(f"hoop.ray: cpus_per_slot={cpus_per_slot} must be >= 0, "
                                 f"gpus_per_slot={gpus_per_slot} > 0")
        if cpus_per_slot == 0 and not use_gpu:
            raise HoopValueError("hoop.ray: cpus_per_slot=0 without GPUs gives no slot count")
        if gpus_per_slot is not None and not use_gpu:
            raise HoopValueError("hoop.ray: gpus_per_slot needs use_gpu=True")
        ## The ElasticSettings run() uses.
        self.settings = settings or ElasticSettings()
        ## CPUs Ray reserves for each worker.
        self.cpus_per_slot = cpus_per_slot
        ## GPUs Ray reserves for each worker (0 without use_gpu).
        self.gpus_per_slot = (gpus_per_slot or 1) if use_gpu else 0
        ## Variables set in every worker.
        self.env_vars = dict(env_vars or {})
        ## Seconds the others may run after a worker's function raised.
        self.failure_grace_s = failure_grace_s
        self._started = False

    def start(self):
        """Starts Ray where it is not started yet; run() may be called from then on."""
        import ray

        if not ray.is_initialized():
            ray.init()
        self._started = True

    def shutdown(self):
        """Ends the executor (run() holds no workers or store between calls); start() may
        begin again."""
        self._started = False

    def run(self, worker_fn, callbacks=None):
        """Runs worker_fn() (which trains through hvd.elastic.run) on the job's workers until
        they return; their results in the last round's rank order. Raises HoopError when a
        worker's function raises, the job stays below min_np for elastic_timeout, or it needs
        more than reset_limit resets."""
        if callbacks:
            raise HoopValueError("hoop.ray: ElasticRayExecutor.run(callbacks=...): hoop passes "
                                 "no worker logs to the driver; return values from worker_fn")
        if not self._started:
            raise HoopValueError("hoop.ray: start() the executor first")
        # A store of its own for each run: a job's rounds start at 0 in a store without keys.
        job = _ElasticJob(self, worker_fn)
        try:
            return job.run()
        finally:
            job.stop_all()
            job.store.stop()


class _ElasticJob:
    """One run(): the driver's loop over discovery, the workers' ends and the failure reports."""

    def __init__(self, executor, fn):
        import ray

        self.x = executor
        self.s = executor.settings
        self.store = DriverStore(ray.util.get_node_ip_address(), self.s.timeout_s)
        self.rounds = ElasticRounds("127.0.0.1", self.store.port, self.store.secret,
                                    self.store.job_id, self.s.timeout_s)
        self.fn = fn
        self.workers = []
        self.round = -1
        self.resets = 0
        self.blacklist = set()
        self.failed_seen = {}
        self.nodes = []
        self.next_discovery = 0.0
        self.changed = False
        self.finishing = False
        self.wait_since = time.monotonic()
        self.serial = 0
        self.worker_cls = None
        self.raised = []  # (whether it is a HoopError, rank, line) of each function that raised
        self.raised_at = None

    def say(self, line):
        if self.s.verbose:
            print(f"hoop.ray: elastic: {line}", file=sys.stderr, flush=True)

    def run(self):
        import ray

        while True:
            now = time.monotonic()
            # Once the job is ending, or failing on a raise, it gets no new round.
            settled = self.finishing or self.raised
            if not settled and now >= self.next_discovery:
                self.discover()
            if not settled:
                self.check_failed_rounds()
                self.reconcile()
            live = [w for w in self.workers if w.running]
            if self.raised and (not [w for w in live if not w.removed] or
                                now > self.raised_at + self.x.failure_grace_s):
                lines = [line for _, _, line in sorted(self.raised)]
                # They took the raise for a lost peer, and wait for a round that will not come.
                stopped = [w.where() for w in live if not w.removed]
                if stopped:
                    lines.append(f"{', '.join(stopped)} still running after "
                                 f"{self.x.failure_grace_s} s: stopped")
                self.fail("; ".join(lines))
            if self.finishing and not [w for w in live if not w.removed]:
                done = sorted((w for w in self.workers if w.finished), key=lambda w: w.rank)
                return [w.result for w in done]
            refs = {w.ref: w for w in live}
            if not refs:
                time.sleep(_TICK_S)
                continue
            ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=_TICK_S)
            for ref in ready:
                self.ended(refs[ref], ref)

    # -- slots ------------------------------------------------------------------------------

    def discover(self):
        import ray

        self.next_discovery = time.monotonic() + _DISCOVERY_S
        self.nodes = [n for n in ray.nodes() if n.get("Alive")]
        alive = {n["NodeID"] for n in self.nodes}
        self.blacklist &= alive  # a node that left and comes back under a new id is new

    def slots(self, node):
        if node["NodeID"] in self.blacklist:
            return 0
        res = node.get("Resources", {})
        counts = []
        if self.x.cpus_per_slot:
            counts.append(int(res.get("CPU", 0) // self.x.cpus_per_slot))
        if self.x.gpus_per_slot:
            counts.append(int(res.get("GPU", 0) // self.x.gpus_per_slot))
        return min(counts)

    # -- the workers' ends ------------------------------------------------------------------

    def ended(self, w, ref):
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        w.running = False
        try:
            w.result = ray.get(ref)
            w.finished = True
        except RayTaskError as e:
            if not w.removed:
                # The others usually fail too, with hoop's errors naming this one: they get a
                # grace period to end, so that the line can put the root cause first.
                hoop_error = isinstance(getattr(e, "cause", None), HoopError)
                self.raised.append((hoop_error, w.rank, f"{w.where()} raised: {_cause_line(e)}"))
                self.raised_at = self.raised_at or time.monotonic()
            return
        except RayActorError as e:
            if w.removed:
                return
            if self.finishing:
                self.fail(f"{w.where()} died as the job was ending: {_first_line(e)}")
            if not any(self.rounds.joined(r, rank) for r, rank in w.ranks.items()):
                self.blacklist.add(w.node["NodeID"])
                self.say(f"{w.where()} died before joining a round: {_first_line(e)}; node "
                         f"{w.node['NodeManagerAddress']} is blacklisted")
            else:
                self.say(f"{w.where()} of round {self.round} died: {_first_line(e)}")
            self.changed = True
            return
        if not self.finishing:
            # The training function returned: the job is ending, no round follows.
            self.finishing = True
            self.stop_orphaned_round(w)

    def stop_orphaned_round(self, finished):
        """Workers started for a round the finished worker never joined wait for it in vain."""
        if finished.rank < 0 or self.rounds.joined(self.round, finished.rank):
            return
        for w in self.workers:
            if w.running and not w.removed and w.first_round == self.round:
                self.say(f"the job ended before round {self.round} began; stopping worker "
                         f"{w.serial}")
                self.remove(w)

    def remove(self, w):
        import ray

        w.removed = True
        ray.kill(w.actor)

    def check_failed_rounds(self):
        """As hooprun: a round every member reported failed gets a successor with the same
        workers; a member that neither reported nor joined a later round within the reporters'
        timeout is taken for hung, killed and replaced."""
        if self.round < 0 or self.changed:
            return
        now = time.monotonic()
        for failed in range(max(0, self.round - _REPORTED_ROUNDS + 1), self.round + 1):
            members = [w for w in self.workers
                       if w.running and not w.removed and failed in w.ranks]
            if not members:
                continue
            size = max(w.ranks[failed] for w in self.workers if failed in w.ranks) + 1
            ranks, timeout_s, cause = self.rounds.failed(failed, size)
            if not ranks:
                continue
            first = self.failed_seen.setdefault(failed, now)
            silent = [w for w in members
                      if w.ranks[failed] not in ranks and not self.joined_after(w, failed)]
            if not silent:
                if failed == self.round:
                    self.say(f"round {failed} failed on every worker ({cause}); starting the "
                             f"next with the same workers")
                    self.changed = True
                    return
                continue
            if now < first + timeout_s:
                continue
            for w in silent:
                self.say(f"{w.where()} has not answered since round {failed} failed (first "
                         f"report: {cause}); stopping it")
                self.remove(w)
            self.changed = True
            return

    def joined_after(self, w, failed):
        return (self.round > failed and self.round in w.ranks
                and self.rounds.joined(self.round, w.ranks[self.round]))

    # -- rounds -----------------------------------------------------------------------------

    def reconcile(self):
        alive = {n["NodeID"] for n in self.nodes}
        for w in self.workers:
            if w.running and not w.removed and w.node["NodeID"] not in alive:
                self.say(f"node {w.node['NodeManagerAddress']} is gone; stopping worker "
                         f"{w.serial}")
                self.remove(w)
                self.changed = True
        members = [w for w in self.workers if w.running and not w.removed]
        cap = self.s.max_np or sys.maxsize
        fresh = []
        for node in self.nodes:
            used = {w.slot for w in members if w.node["NodeID"] == node["NodeID"]}
            for slot in range(self.slots(node)):
                if len(members) + len(fresh) >= cap:
                    break
                if slot not in used:
                    fresh.append(_Worker(self.serial + len(fresh), node, slot))
        if not self.changed and not fresh:
            return
        total = len(members) + len(fresh)
        if total < self.s.min_np:
            if time.monotonic() >= self.wait_since + self.s.elastic_timeout:
                self.fail(f"{total} worker slot{'' if total == 1 else 's'} available, fewer than "
                          f"min_np={self.s.min_np}, after waiting {self.s.elastic_timeout} s "
                          f"(elastic_timeout)")
            return
        self.publish(members, fresh)

    def publish(self, members, fresh):
        import ray

        if self.round >= 0 and self.s.reset_limit is not None and \
                self.resets >= self.s.reset_limit:
            self.fail(f"the job needs a new round, but it was reset {self.resets} time"
                      f"{'' if self.resets == 1 else 's'} already (reset_limit)")
        everyone = members + fresh
        # Nodes in the order of their lowest rank in the last round, new nodes last; on a node,
        # its old workers first: rank 0 holds committed state whenever any worker does.
        key = {}
        for w in everyone:
            r = w.rank if w.rank >= 0 else sys.maxsize
            key[w.node["NodeID"]] = min(key.get(w.node["NodeID"], sys.maxsize), r)
        node_order = sorted(key, key=lambda n: key[n])  # stable: first seen first on ties
        ordered, places = [], []
        for cross, node in enumerate(node_order):
            on_node = sorted((w for w in everyone if w.node["NodeID"] == node),
                             key=lambda w: (w.rank if w.rank >= 0 else sys.maxsize, w.slot))
            for local, w in enumerate(on_node):
                places.append((w.id, (len(ordered), len(everyone), local, len(on_node), cross,
                                      len(node_order))))
                ordered.append(w)
        round_ = self.round + 1
        self.rounds.publish(round_, places)
        if self.round >= 0:
            self.resets += 1
        self.round = round_
        for r, w in enumerate(ordered):
            w.rank = r
            w.ranks[round_] = r
        self.say(f"round {round_}: {len(ordered)} worker{'' if len(ordered) == 1 else 's'} on "
                 f"{len(node_order)} node{'' if len(node_order) == 1 else 's'}"
                 + (f", {len(fresh)} new" if fresh else ""))
        self.changed = False
        self.wait_since = time.monotonic()
        for w in fresh:
            self.serial = max(self.serial, w.serial + 1)
            w.first_round = round_
            w.actor = self.start_actor(w)
            w.ref = w.actor.run.remote(_elastic_worker, [self.worker_env(w), self.fn], {})
            self.workers.append(w)

    def start_actor(self, w):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self.worker_cls is None:
            self.worker_cls = _worker_class()
        # Hard affinity: the actor waits for the slot's resources (a replaced actor's may not
        # be free yet) and fails only when the node is gone.
        strategy = NodeAffinitySchedulingStrategy(w.node["NodeID"], soft=False)
        return self.worker_cls.options(num_cpus=self.x.cpus_per_slot,
                                       num_gpus=self.x.gpus_per_slot,
                                       scheduling_strategy=strategy).remote()

    def worker_env(self, w):
        env = self.store.job_env(self.x.env_vars, self.s.nics)
        env["HOOP_ELASTIC_ID"] = w.id
        env["HOOP_ELASTIC_TIMEOUT"] = str(self.s.elastic_timeout)
        return env

    # -- the end ----------------------------------------------------------------------------

    def fail(self, line):
        self.stop_all()
        raise HoopError(f"hoop.ray: elastic job failed: {line}")

    def stop_all(self):
        """Ends every actor of the job: those still running, and those whose function returned
        (an actor holds its slot's resources until it ends)."""
        import ray

        for w in self.workers:
            w.removed = True
            ray.kill(w.actor)


def _elastic_worker(env, fn):
    """In the actor: the worker's hoop environment (no rank: the round gives it), then fn()."""
    apply_env(env, drop=("HOOP_RANK", "HOOP_SIZE", "HOOP_LOCAL_RANK", "HOOP_LOCAL_SIZE",
                         "HOOP_CROSS_RANK", "HOOP_CROSS_SIZE"))
    return fn()

