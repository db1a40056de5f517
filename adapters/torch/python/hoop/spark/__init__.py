"""hoop on a Spark cluster: horovod.spark.run, over hoop.

    from pyspark.sql import SparkSession
    import hoop.spark

    spark = SparkSession.builder.master("local-cluster[2,1,1024]").getOrCreate()
    results = hoop.spark.run(train, kwargs={"epochs": 1}, num_proc=2)

run() is one barrier-mode Spark stage with one task per rank: Spark starts the tasks together
or not at all. A task's rank is its partition; its local rank counts the earlier tasks on its
host. The rendezvous store runs in the driver, and its secret reaches the tasks inside the
stage's closure. Inside `fn`, hoop.torch and the other adapters start as under hooprun.

A task whose `fn` raises ends hoop on its rank (the other ranks' collectives then fail at once
naming it) and reports the error; the stage still completes, and run() raises a HoopError
naming each failed rank, its host and its error. A task whose process dies fails the stage
(Spark does not run a failed barrier stage again), and run() raises naming the rank and
Spark's reason.
"""

import io
import re
import sys
import time
import traceback

from hoop._engines import (DriverStore, apply_env, end_hoop, host_layout, layout_env,
                           one_interface)
from hoop._hoop import HoopError, HoopValueError

__all__ = ["run"]


def run(fn, args=(), kwargs=None, num_proc=None, start_timeout=None, env=None, stdout=None,
        stderr=None, verbose=1, nics=None, prefix_output_with_timestamp=False):
    """fn(*args, **kwargs) on num_proc ranks (default: the cluster's default parallelism), one
    Spark task each; the results in rank order. What the tasks print goes to stdout and
    stderr (default: this process's), each line prefixed with its rank, as hooprun does."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        raise HoopValueError("hoop.spark.run: no SparkContext: create a SparkSession first")
    kwargs = dict(kwargs or {})
    num_proc = num_proc or sc.defaultParallelism
    if num_proc < 1:
        raise HoopValueError(f"hoop.spark.run: num_proc={num_proc} must be >= 1")
    nics = one_interface(nics, "hoop.spark.run")
    start_timeout = int(start_timeout or 30)
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    driver = sc.getConf().get("spark.driver.host") or "127.0.0.1"
    store = DriverStore(driver, start_timeout)
    task = _task(store.job_env(env, nics), fn, tuple(args), kwargs)
    if verbose >= 2:
        print(f"hoop.spark.run: {num_proc} ranks, store at {driver}:{store.port}", file=stderr)
    started = time.monotonic()
    try:
        rdd = sc.parallelize(range(num_proc), num_proc).barrier().mapPartitions(task)
        try:
            reports = rdd.collect()
        except Exception as e:  # py4j's error carries Spark's reason for failing the stage
            raise HoopError(f"hoop.spark.run: the stage failed: {_spark_reason(e)}") from None
    finally:
        store.stop()
    by_rank = {r["rank"]: r for r in reports}
    for r in sorted(by_rank):
        _forward(by_rank[r], stdout, stderr, prefix_output_with_timestamp)
    failed = [by_rank[r] for r in sorted(by_rank) if by_rank[r]["status"] == "raised"]
    if failed:
        # The root cause first: a rank whose own code raised, then the HoopErrors of the
        # others (which name it).
        failed.sort(key=lambda rep: (rep["hoop_error"], rep["rank"]))
        lines = [f"rank {rep['rank']} (host {rep['host']}) raised: {rep['error']}"
                 for rep in failed]
        raise HoopError("hoop.spark.run failed: " + "; ".join(lines))
    if verbose >= 2:
        print(f"hoop.spark.run: done in {time.monotonic() - started:.1f} s", file=stderr)
    return [by_rank[r]["result"] for r in range(num_proc)]


def _task(job_env, fn, args, kwargs):
    """The stage's function: what each task runs, with the job's environment (the store's
    address and secret) in its closure (Spark ships it to the executors)."""

    def task(_):
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        rank = ctx.partitionId()
        hosts = [info.address.rsplit(":", 1)[0] for info in ctx.getTaskInfos()]
        report = {"rank": rank, "host": hosts[rank], "status": "ok", "result": None,
                  "stdout": "", "stderr": "", "hoop_error": False, "error": ""}
        apply_env(dict(job_env, **layout_env(rank, host_layout(hosts))))
        out, err = io.StringIO(), io.StringIO()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            report["result"] = fn(*args, **kwargs)
        except BaseException as e:  # reported, not raised: see the module's docstring
            report.update(status="raised", hoop_error=isinstance(e, HoopError),
                          error=f"{type(e).__name__}: {_first_line(str(e))}")
            err.write(traceback.format_exc())
        finally:
            sys.stdout, sys.stderr = saved
            # Spark reuses its Python workers: the next run's task in this process must start
            # hoop afresh, in its own job.
            end_hoop()
        report["stdout"], report["stderr"] = out.getvalue(), err.getvalue()
        yield report

    return task


def _first_line(text):
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def _forward(report, stdout, stderr, stamp):
    for text, stream in ((report["stdout"], stdout), (report["stderr"], stderr)):
        for line in text.splitlines():
            prefix = f"[{report['rank']}]"
            if stamp:
                prefix = time.strftime("%Y-%m-%d %H:%M:%S ") + prefix
            print(f"{prefix} {line}", file=stream)


def _spark_reason(e):
    """Why Spark failed the stage, from a Py4J error: the rank whose task failed where Spark
    names its partition ("barrier task ResultTask(stage, partition)"), and Spark's line."""
    text = str(e)
    line = _first_line(text)
    for candidate in text.splitlines():
        if "Job aborted" in candidate:
            line = candidate[candidate.index("Job aborted"):].strip()
            break
    # A Python exception outside fn (unpickling it, importing hoop) is in Spark's text too.
    python = re.search(r"^([A-Za-z_]\w*(?:Error|Exception)): (.+)$", text, re.MULTILINE)
    cause = f"{python.group(1)}: {python.group(2).strip()}" if python else "its process died?"
    task = re.search(r"ResultTask\(\d+, (\d+)\)", line)
    if task:
        return f"rank {task.group(1)}'s task ended without a result ({cause}): {line}"
    return line
