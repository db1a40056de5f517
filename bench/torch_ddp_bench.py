"""Training throughput of hoop.torch and of torch DistributedDataParallel over gloo and over
backend "hoop", on a model of examples/torch_fashion_mnist.py (--model cnn or wide-mlp).

    hooprun -np 2 /usr/bin/python3 bench/torch_ddp_bench.py --mode hoop
    hooprun -np 2 /usr/bin/python3 bench/torch_ddp_bench.py --mode ddp
    hooprun -np 2 /usr/bin/python3 bench/torch_ddp_bench.py --mode ddp-hoop --model wide-mlp
    hooprun -np 2 /usr/bin/python3 bench/torch_ddp_bench.py --mode ddp-none --model wide-mlp

Every mode runs under hooprun: ddp (gloo) reads its rank and world size from
HOOP_RANK/HOOP_SIZE and meets at 127.0.0.1:--port; ddp-hoop calls init_process_group("hoop")
alone, which meets through hooprun's store; ddp-none is DDP over gloo with a comm hook that
exchanges nothing (each rank keeps its own gradients): what a step costs besides the gradients'
exchange, DDP's bucket copies included, the bound of any backend. Each rank trains --steps
steps of --batch-size examples after --warmup untimed steps; rank 0 prints "samples/s <value>"
(examples per second, all ranks). Every mode uses SGD with momentum and 1 torch thread per
rank by default.
"""

import argparse
import os

import torch

from call_timing import add_training_args
from torch_training import MODELS, load_fashion_mnist, samples_per_second


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["hoop", "ddp", "ddp-hoop", "ddp-none"], required=True)
    p.add_argument("--model", choices=sorted(MODELS), default="cnn")
    p.add_argument("--grad-as-bucket-view", action="store_true",
                   help="DDP's gradient_as_bucket_view=True (no copies into and out of buckets)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--port", type=int, default=29517, help="ddp rendezvous port")
    add_training_args(p)
    return p.parse_args()


def setup_hoop(model, optimizer):
    import hoop.torch as hvd
    hvd.init()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    return model, optimizer, hvd.rank(), hvd.size(), hvd.barrier, hvd.shutdown


def keep_local(state, bucket):
    """A DDP comm hook that exchanges nothing: the bucket's own gradients, done at once."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def setup_ddp(model, optimizer, port, backend, bucket_view, exchange=True):
    import torch.distributed as dist
    if backend == "hoop":
        import hoop.torch.distributed  # noqa: F401  registers the backend
        dist.init_process_group("hoop")  # under hooprun: its rank, size and store
        rank, size = dist.get_rank(), dist.get_world_size()
    else:
        rank, size = int(os.environ["HOOP_RANK"]), int(os.environ["HOOP_SIZE"])
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=size)
    # Broadcasts rank 0's weights.
    model = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=bucket_view)
    if not exchange:
        model.register_comm_hook(None, keep_local)
    optimizer = torch.optim.SGD(model.parameters(), lr=optimizer.defaults["lr"],
                                momentum=optimizer.defaults["momentum"])
    return model, optimizer, rank, size, dist.barrier, dist.destroy_process_group


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x, y = load_fashion_mnist("train", args.data_dir)
    model = MODELS[args.model]()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    if args.mode == "hoop":
        model, optimizer, rank, size, barrier, finish = setup_hoop(model, optimizer)
    else:
        backend = "hoop" if args.mode == "ddp-hoop" else "gloo"
        model, optimizer, rank, size, barrier, finish = setup_ddp(
            model, optimizer, args.port, backend, args.grad_as_bucket_view,
            exchange=args.mode != "ddp-none")

    rate = samples_per_second(model, optimizer, x, y, rank, size, args.batch_size, args.warmup,
                              args.steps, barrier)
    if rank == 0:
        print(f"samples/s {rate:.1f}", flush=True)
    finish()


if __name__ == "__main__":
    main()
