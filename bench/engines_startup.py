"""Startup overhead of hoop's launchers: from asking for a 2-rank job to its first allreduce
returning, under hooprun, hoop.ray's RayExecutor and hoop.spark.run.

    PYTHONPATH=build/python .engines/venv/bin/python bench/engines_startup.py [--reps 5]

Each repetition times, interleaved:
  hooprun     `hooprun -np 2 python -c <init; allreduce>`: process start to exit;
  ray         RayExecutor.start() and a run() of init + allreduce (Ray itself already up),
              then a second run() on the same workers;
  spark       hoop.spark.run() of init + allreduce (the SparkSession already up), then a
              second call (Spark's Python workers reused).
The engines' own start (ray.init, the SparkSession) is timed once. Prints medians in seconds.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNIPPET = ("import torch, hoop.torch as hvd; hvd.init(); "
           "hvd.allreduce(torch.ones(4), name='x'); hvd.shutdown()")


def first_allreduce():
    import torch

    import hoop.torch as hvd

    hvd.init()
    hvd.allreduce(torch.ones(4), name="x")
    hvd.shutdown()
    return True


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import ray
    from pyspark.sql import SparkSession

    import hoop.spark
    from hoop.ray import RayExecutor

    ray_up = timed(lambda: ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False))
    spark = None

    def start_spark():
        nonlocal spark
        spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(
                     os.path.abspath(x) for x in os.environ["PYTHONPATH"].split(os.pathsep)))
                 .getOrCreate())
        spark.sparkContext.setLogLevel("OFF")

    spark_up = timed(start_spark)
    rows = {k: [] for k in ("hooprun", "ray start+run", "ray 2nd run", "spark run",
                            "spark 2nd run")}
    for _ in range(args.reps):
        rows["hooprun"].append(timed(lambda: subprocess.run(
            [os.path.join(ROOT, "build", "bin", "hooprun"), "-np", "2", "/usr/bin/python3", "-c",
             SNIPPET], check=True, capture_output=True)))
        e = RayExecutor(num_workers=2)
        rows["ray start+run"].append(timed(lambda: (e.start(), e.run(first_allreduce))))
        rows["ray 2nd run"].append(timed(lambda: e.run(first_allreduce)))
        e.shutdown()
        rows["spark run"].append(timed(lambda: hoop.spark.run(first_allreduce, num_proc=2)))
        rows["spark 2nd run"].append(timed(lambda: hoop.spark.run(first_allreduce, num_proc=2)))
    print(f"# 2 ranks, medians of {args.reps} interleaved repetitions (s)")
    print(f"# engines' own start, once: ray.init {ray_up:.2f} s, SparkSession {spark_up:.2f} s")
    print("| launcher | to the first allreduce (s) | min | max |")
    print("|---|---:|---:|---:|")
    for name, values in rows.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} | "
              f"{max(values):.2f} |")
    spark.stop()
    ray.shutdown()


if __name__ == "__main__":
    main()
