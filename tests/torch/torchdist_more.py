"""One rank of the torch.distributed backend's checks beyond single calls: object collectives,
a process group of a subset of the ranks (new_group), ZeroRedundancyOptimizer and Join with
uneven inputs, each against gloo or a local reference. Run under torchrun with 2 or more ranks:

    python3 -m torch.distributed.run --redirects 1 --tee 1 --nproc_per_node=3 \\
        tests/torch/torchdist_more.py

Prints "rank R: torchdist more ok" and exits 0, or each FAIL and exits 1.
"""

import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import hoop.torch.distributed  # noqa: F401  registers backend "hoop"
from torchdist_common import compare_parameters, finish

failures = []


def check(what, ok):
    if not ok:
        failures.append(what)


def objects(rank, size):
    got = [None] * size
    dist.all_gather_object(got, {"rank": rank, "payload": "x" * (rank * 37)})
    check("all_gather_object", got == [{"rank": r, "payload": "x" * (r * 37)} for r in range(size)])
    box = [f"from {size - 1}", size] if rank == size - 1 else [None, None]
    dist.broadcast_object_list(box, src=size - 1)
    check("broadcast_object_list", box == [f"from {size - 1}", size])


def subgroup(rank, size):
    members = list(range(1, size))  # every rank but 0
    group = dist.new_group(members)
    if rank in members:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=group)
        check(f"new_group all_reduce {t.item()}", t.item() == float(sum(members)))


def model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def zero(rank, group):
    net = DDP(model(), process_group=group)
    opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.Adam, lr=0.01,
                                  process_group=group)
    g = torch.Generator().manual_seed(7 + rank)
    for _ in range(5):
        opt.zero_grad()
        net(torch.randn(8, 16, generator=g)).square().mean().backward()
        opt.step()
    return [p.detach().clone() for p in net.parameters()]


def join(rank, group):
    net = DDP(model(), process_group=group)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(11 + rank)
    with Join([net]):
        for _ in range(3 + 2 * rank):  # uneven: rank r has 3 + 2r batches
            opt.zero_grad()
            net(torch.randn(4, 16, generator=g)).square().mean().backward()
            opt.step()
    return [p.detach().clone() for p in net.parameters()]


def main():
    dist.init_process_group("hoop")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    objects(rank, size)
    subgroup(rank, size)
    for name, train in (("ZeroRedundancyOptimizer", zero), ("Join", join)):
        compare_parameters(name, train(rank, None), train(rank, gloo), failures)
    return finish(failures, "torchdist more ok")


if __name__ == "__main__":
    sys.exit(main())
