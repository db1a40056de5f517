"""hoop.torch against horovod.torch on one script: the same calls through either module.

    hooprun -np 2 /usr/bin/python3 bench/torch_horovod_bench.py --impl hoop
    PYTHONPATH=<prefix> horovodrun -np 2 --gloo /usr/bin/python3 bench/torch_horovod_bench.py \
        --impl horovod

Four cases, rank 0 prints one line each ("<case> <value>"):
  lone_us    median time of one allreduce of a 2-float tensor (--lone-reps calls);
  step_us    median time of 400 allreduce_async_ of 4 KiB tensors then synchronize on each;
  large_us   median time of one 64 MiB allreduce;
  samples/s  training throughput of examples/torch_fashion_mnist.py's model (DistributedOptimizer,
             SGD with momentum, --batch-size per rank, --steps timed steps).
Every timed repetition starts after a barrier (an allreduce of one float, in both modules).
With --device cuda every tensor, the model and the data live on cuda:<local rank modulo the
device count> (scripts/gpu-check runs it so on 1 and 2 ranks of one GPU).
"""

import argparse
import importlib

import torch

from call_timing import add_case_args, add_training_args, median_us
from torch_training import Net, load_fashion_mnist, samples_per_second


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--impl", choices=["hoop", "horovod"], required=True)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    add_case_args(p)
    add_training_args(p)
    return p.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    hvd = importlib.import_module(f"{args.impl}.torch")
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.set_device(device)
    sync_one = torch.zeros(1, device=device)

    def barrier():
        hvd.allreduce(sync_one, name="bench.barrier", op=hvd.Sum)

    def timed(body, reps):
        return median_us(body, reps, barrier)

    lone = torch.ones(2, device=device)
    tensors = [torch.ones(1024, device=device) for _ in range(400)]
    large = torch.ones(16 << 20, device=device)

    def step():
        handles = [hvd.allreduce_async_(t, name=f"step.{i}", op=hvd.Sum)
                   for i, t in enumerate(tensors)]
        for h in handles:
            hvd.synchronize(h)

    cases = [
        ("lone_us", lambda: hvd.allreduce_(lone, name="lone", op=hvd.Sum), args.lone_reps),
        ("step_us", step, args.step_reps),
        ("large_us", lambda: hvd.allreduce_(large, name="large", op=hvd.Sum), args.large_reps),
    ]
    for name, body, reps in cases:
        body()  # warm-up: negotiation fills the response cache, buffers fault in
        value = timed(body, reps)
        if rank == 0:
            print(f"{name} {value:.1f}", flush=True)

    torch.manual_seed(0)
    x, y = load_fashion_mnist("train", args.data_dir)
    x, y = x.to(device), y.to(device)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    rate = samples_per_second(model, optimizer, x, y, rank, size, args.batch_size, args.warmup,
                              args.steps, barrier)
    if rank == 0:
        print(f"samples/s {rate:.1f}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
