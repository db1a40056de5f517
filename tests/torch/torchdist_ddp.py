"""One rank of the DDP check of the torch.distributed backend: the same small model trained with
DistributedDataParallel over backend "hoop" and over gloo, from the same seed on the same
data (buckets, no_sync, a custom comm hook using get_future, the fp16 and bf16 compression
hooks, find_unused_parameters with a layer the forward skips), must end with equal parameters.
Run under torchrun:

    python3 -m torch.distributed.run --nproc_per_node=2 tests/torch/torchdist_ddp.py

Prints "rank R: ddp matches gloo (N parameters)" and exits 0, or FAIL and exits 1.
"""

import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import hoop.torch.distributed  # noqa: F401  registers backend "hoop"
from torchdist_common import compare_parameters, finish

HOOKS = ("default", "custom", "fp16", "bf16", "unused")


class Net(torch.nn.Module):
    """Three layers, and one that only the "unused" case's forward skips."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.body = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 10))
        self.skipped = torch.nn.Linear(32, 10)
        self.skip = False

    def forward(self, x):
        return self.body(x) if self.skip else self.body(x) + self.skipped(x)


def custom_hook(state, bucket):
    """An allreduce through the group's Work future, then the average: what a user writes."""
    group = state if state is not None else dist.group.WORLD
    tensor = bucket.buffer().div_(dist.get_world_size(group))
    return dist.all_reduce(tensor, group=group, async_op=True).get_future().then(
        lambda fut: fut.value()[0])


def bf16_hook(state, bucket):
    """torch's bf16 compression hook, under another name: torch 1.13's DDP refuses the hook
    itself unless CUDA and NCCL are built, whatever the backend."""
    return default_hooks.bf16_compress_hook(state, bucket)


def bf16_reference_hook(state, bucket):
    """What bf16_compress_hook computes, for gloo, which has no bf16 sum: each rank's gradients
    rounded to bf16 and divided there, summed exactly (two ranks) in f32, rounded to bf16."""
    group = state if state is not None else dist.group.WORLD
    compressed = bucket.buffer().to(torch.bfloat16).div_(dist.get_world_size(group)).float()

    def decompress(fut):
        out = bucket.buffer()
        out.copy_(fut.value()[0].to(torch.bfloat16))
        return out

    return dist.all_reduce(compressed, group=group, async_op=True).get_future().then(decompress)


def train(group, hook):
    module = Net()
    module.skip = hook == "unused"
    # Several buckets.
    net = DDP(module, process_group=group, bucket_cap_mb=0.01,
              find_unused_parameters=hook == "unused")
    if hook == "custom":
        net.register_comm_hook(group, custom_hook)
    elif hook == "fp16":
        net.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif hook == "bf16":
        net.register_comm_hook(group, bf16_hook if group is None else bf16_reference_hook)
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
    gloo = dist.new_group(backend="gloo")
    failures = []
    for hook in HOOKS:
        mine = train(None, hook)
        compare_parameters(f"{hook} hook", mine, train(gloo, hook), failures)
    return finish(failures, f"ddp matches gloo ({len(mine)} parameters, {len(HOOKS)} cases)")


if __name__ == "__main__":
    sys.exit(main())
