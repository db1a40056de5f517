"""What bench/torch_ddp_bench.py and bench/torch_horovod_bench.py share: the models and data of
examples/torch_fashion_mnist.py, the training options and the timed training loop."""

import os
import sys
import time

import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from torch_fashion_mnist import MODELS, Net, load_fashion_mnist  # noqa: E402,F401


def samples_per_second(model, optimizer, x, y, rank, size, batch_size, warmup, steps, barrier):
    """Trains `warmup` untimed steps, then `steps` timed ones between barriers, each on this
    rank's slice of `batch_size` examples; returns examples per second over all ranks."""

    def step(i):
        start = ((i * size + rank) * batch_size) % (len(y) - batch_size)
        optimizer.zero_grad()
        F.cross_entropy(model(x[start:start + batch_size]), y[start:start + batch_size]).backward()
        optimizer.step()

    for i in range(warmup):
        step(i)
    barrier()
    begin = time.perf_counter()
    for i in range(steps):
        step(warmup + i)
    barrier()
    return steps * batch_size * size / (time.perf_counter() - begin)
