"""DistributedOptimizer trains exactly like one process on the global batch.

Run under hooprun -np 2 (any N works). Every rank also trains a reference copy of the model
by itself on the whole global batch (rank r's shard is rows [r*B, (r+1)*B)), so averaged
shard gradients must reproduce the reference's parameters. Prints "OK <check>" on rank 0.
"""

import copy
import warnings

import torch
import torch.nn.functional as F

import hoop.torch as hvd
from harness import check, ok

hvd.init()
R, N = hvd.rank(), hvd.size()
torch.set_num_threads(1)
B = 8  # rows per rank per micro-batch


class Net(torch.nn.Module):
    def __init__(self, sparse=False):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 6, sparse=sparse)
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 4)
        self.unused = torch.nn.Linear(3, 3)  # never gets a gradient

    def forward(self, ids):
        return self.fc2(torch.relu(self.fc1(self.embed(ids).mean(1))))


def batch(step, micro, rows):
    g = torch.Generator().manual_seed(1000 * step + micro)
    return torch.randint(0, 20, (rows, 5), generator=g), torch.randint(0, 4, (rows,), generator=g)


def train(model, opt, steps, passes, distributed, loss_scale=1.0, clip=False):
    for step in range(steps):
        opt.zero_grad()
        for micro in range(passes):
            ids, labels = batch(step, micro, B * N)
            if distributed:
                ids, labels = ids[R * B:(R + 1) * B], labels[R * B:(R + 1) * B]
            (F.cross_entropy(model(ids), labels) * loss_scale).backward()
        if clip and distributed:
            opt.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            with opt.skip_synchronize():
                opt.step()
        else:
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()


def compare(name, make_opt, steps=4, passes=1, atol=1e-6, sparse=False, loss_scale=1.0,
            clip=False, **dist_kwargs):
    torch.manual_seed(0)
    reference = Net()
    model = Net(sparse=sparse)
    model.load_state_dict(reference.state_dict())
    ref_opt = make_opt(reference.parameters())
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **dist_kwargs)
    train(reference, ref_opt, steps, passes, distributed=False, loss_scale=loss_scale, clip=clip)
    train(model, opt, steps, passes, distributed=True, clip=clip)
    for (pname, p), q in zip(model.named_parameters(), reference.parameters()):
        diff = (p - q).abs().max().item()
        check(diff <= atol, f"{name}: parameter {pname} differs from the reference by {diff}")
    ok(f"DistributedOptimizer {name} matches single-process training")


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def adam(params):
    return torch.optim.Adam(params, lr=0.01)


def check_training():
    compare("SGD+momentum", sgd)
    compare("Adam", adam)
    compare("backward_passes_per_step=2", sgd, passes=2)
    compare("Compression.fp16", sgd, atol=1e-4, compression=hvd.Compression.fp16)
    compare("gradient_predivide_factor=2", sgd, gradient_predivide_factor=2.0)
    compare("num_groups=2", sgd, num_groups=2)
    compare("op=Sum", sgd, op=hvd.Sum, loss_scale=float(N))
    compare("synchronize+clip+skip_synchronize", sgd, clip=True)
    compare("sparse embedding gradients", lambda params: torch.optim.SGD(params, lr=0.1),
            sparse=True)
    compare("sparse_as_dense", lambda params: torch.optim.SGD(params, lr=0.1), sparse=True,
            sparse_as_dense=True)


def check_misuse():
    model = Net()
    try:
        hvd.DistributedOptimizer(sgd(model.parameters()),
                                 named_parameters=[("same", p) for p in model.parameters()])
        check(False, "duplicate names must raise")
    except ValueError as e:
        check("duplicates" in str(e), str(e))
    opt = hvd.DistributedOptimizer(sgd(model.parameters()))  # auto names
    ids, labels = batch(0, 0, B)
    F.cross_entropy(model(ids), labels).backward()
    try:
        opt.zero_grad()
        check(False, "zero_grad with reductions in flight must raise")
    except AssertionError as e:
        check("zero_grad" in str(e), str(e))
    opt.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    check(any("skip_synchronize" in str(w.message) for w in caught), "step after synchronize warns")
    opt.zero_grad()
    ok("duplicate names, zero_grad in flight and step after synchronize are reported")


def check_broadcasts():
    torch.manual_seed(R)  # every rank starts different
    model = Net()
    root = N - 1
    opt = torch.optim.Adam(model.parameters(), lr=0.001 * (R + 1), betas=(0.9, 0.99 - R / 100))
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    dist = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(dist, root_rank=root)
    group = dist.param_groups[0]
    check(abs(group["lr"] - 0.001 * (root + 1)) < 1e-12, f"lr {group['lr']}")
    check(group["betas"] == (0.9, 0.99 - root / 100), f"betas {group['betas']}")
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = hvd.allgather(flat.unsqueeze(0))
    check(all(torch.equal(everyone[k], flat) for k in range(N)), "parameters equal everywhere")
    reference = copy.deepcopy(model)
    ref_opt = torch.optim.Adam(reference.parameters(), lr=group["lr"], betas=group["betas"])
    hvd.broadcast_optimizer_state(ref_opt, root_rank=root)  # the same zero-gradient first step
    train(model, dist, 3, 1, distributed=True)
    train(reference, ref_opt, 3, 1, distributed=False)
    steps = [s["step"] for s in dist.state.values()]
    check(all(float(s) == 4 for s in steps), f"Adam steps {steps}")
    for p, q in zip(model.parameters(), reference.parameters()):
        check((p - q).abs().max().item() <= 1e-6, "training after the broadcasts")
    ok("broadcast_parameters + broadcast_optimizer_state from the last rank, then training")


check_training()
check_misuse()
check_broadcasts()
hvd.shutdown()
ok(f"optimizer_test at np {N}")
