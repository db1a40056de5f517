"""What the adapters' benchmark scripts share (bench/torch_horovod_bench.py, jax_bench.py,
tf_bench.py), free of any framework: their options, and the median time of one case."""

import argparse
import statistics
import time


def add_case_args(parser):
    """The repetitions of the per-call cases."""
    parser.add_argument("--lone-reps", type=int, default=1000)
    parser.add_argument("--step-reps", type=int, default=50)
    parser.add_argument("--large-reps", type=int, default=10)


def add_training_args(parser):
    """The options of the timed training run."""
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--data-dir", default=None)


def median_us(body, reps, barrier):
    """The median of `reps` timings of body(), in microseconds, each after barrier() (so that
    every rank starts it together)."""
    times = []
    for _ in range(reps):
        barrier()
        begin = time.perf_counter()
        body()
        times.append((time.perf_counter() - begin) * 1e6)
    return statistics.median(times)


def parse_args(description):
    """The per-call cases' and the training run's options, parsed."""
    parser = argparse.ArgumentParser(description=description)
    add_case_args(parser)
    add_training_args(parser)
    return parser.parse_args()


def report_cases(cases, run, barrier, rank):
    """Times each (name, body, reps) of `cases` as run(body) after one untimed warm-up run
    (compilation, tracing, the response cache); rank 0 prints "<name> <median us>"."""
    for name, body, reps in cases:
        run(body)
        value = median_us(lambda body=body: run(body), reps, barrier)
        if rank == 0:
            print(f"{name} {value:.1f}", flush=True)
