"""hooprun --autotune: the runtime's autotuner changes the fusion threshold, the cycle time and
the allreduce algorithm while this script trains, every result stays exact throughout, and
rank 0 writes the log (a CSV line per trial, then the report of the choice).

Run as: hooprun -np 2 --autotune --autotune-log-file F --autotune-warmup-samples 0
--autotune-steps-per-sample 2 python autotune_test.py. Rank 0 prints "OK <check>".
"""

import os

import torch

import hoop.torch as hvd
from harness import check, ok

hvd.init()
R, N = hvd.rank(), hvd.size()
torch.set_num_threads(1)
log = os.environ.get("HOOP_AUTOTUNE_LOG")
check(os.environ.get("HOOP_AUTOTUNE") == "1" and log, "run me under hooprun --autotune")

# Gradient-like steps: a few tensors of different sizes submitted together, as a backward pass
# does, so that the fusion threshold has something to fuse.
# 14 trials at most, each a settling sample and 3 more of 2 steps: 113 negotiation steps, and
# every training step makes at least one.
sizes = [3, 257, 4099, 65537]
STEPS = 150
for step in range(STEPS):
    tensors = [torch.full((n,), float(R + 1 + step % 7)) for n in sizes]
    handles = [hvd.allreduce_async(t, name=f"grad.{i}", op=hvd.Sum) for i, t in enumerate(tensors)]
    want = sum(r + 1 + step % 7 for r in range(N))
    for i, h in enumerate(handles):
        got = hvd.synchronize(h)
        check(bool((got == want).all()), f"step {step} tensor {i}: {got[:3]} != {want}")
hvd.barrier()
ok(f"{STEPS} steps exact while the autotuner switched settings")

if R == 0:
    with open(log) as f:
        lines = f.read().splitlines()
    check(lines[0].startswith("trial,knob,fusion_threshold_bytes,cycle_time_ms,algorithm,"),
          f"log header: {lines[0]}")
    trials = [line for line in lines[1:] if not line.startswith("#")]
    report = [line for line in lines if line.startswith("#")]
    check(len(trials) >= 10, f"only {len(trials)} trials: {lines}")
    algorithms = {t.split(",")[4] for t in trials}
    check({"ring", "tree", "recursive_doubling"} <= algorithms, f"algorithms tried: {algorithms}")
    check(report and report[0].startswith("# chosen after"), f"no report: {lines}")
    check(any(line.startswith("# fusion threshold:") for line in report), f"report: {report}")
    ok("the log holds each trial and a report of the choice")
hvd.shutdown()
ok(f"autotune_test at np {N}")
