"""One rank of the DDP check of the torch.distributed backend: the same small model trained with
DistributedDataParallel over backend "hoop" and over gloo, from the same seed on the same
data (buckets, no_sync, a custom comm hook using get_future, the fp16 compression hook), must
end with equal parameters. Run under torchrun:

    python3 -m torch.distributed.run --nproc_per_node=2 tests/torch/torchdist_ddp.py

Prints "rank R: ddp matches gloo (N parameters)" and exits 0, or FAIL and exits 1.
"""

import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import hoop.torch.distributed  # noqa: F401  registers backend "hoop"


def model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                               torch.nn.ReLU(), torch.nn.Linear(64, 10))


def custom_hook(state, bucket):
    """An allreduce through the group's Work future, then the average: what a user writes."""
    group = state if state is not None else dist.group.WORLD
    tensor = bucket.buffer().div_(dist.get_world_size(group))
    return dist.all_reduce(tensor, group=group, async_op=True).get_future().then(
        lambda fut: fut.value()[0])


def train(group, hook):
    net = DDP(model(), process_group=group, bucket_cap_mb=0.01)  # several buckets
    if hook == "custom":
        net.register_comm_hook(group, custom_hook)
    elif hook == "fp16":
        net.register_comm_hook(group, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(100 + dist.get_rank())
    accumulated = False
    for step in range(12):
        x = torch.randn(16, 32, generator=g)
        y = torch.randint(0, 10, (16,), generator=g)
        if step % 4 == 3:
            with net.no_sync():  # gradients accumulate locally, exchanged with the next step
                torch.nn.functional.cross_entropy(net(x), y).backward()
            accumulated = True
            continue
        if not accumulated:
            opt.zero_grad()
        accumulated = False
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in net.parameters()]


def main():
    dist.init_process_group("hoop")
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    failures = []
    for hook in ("default", "custom", "fp16"):
        mine = train(None, hook)
        theirs = train(gloo, hook)
        for i, (a, b) in enumerate(zip(mine, theirs)):
            if not torch.allclose(a, b, rtol=1e-6, atol=1e-7):
                failures.append(f"{hook} hook: parameter {i} differs by "
                                f"{(a - b).abs().max().item():.3g}")
    if failures:
        for f in failures:
            print(f"FAIL rank {rank}: {f}")
        return 1
    print(f"rank {rank}: ddp matches gloo ({len(mine)} parameters, 3 hooks)")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
