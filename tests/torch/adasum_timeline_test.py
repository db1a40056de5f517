"""op=hvd.Adasum (allreduce, grouped allreduce, DistributedOptimizer) and the dynamic timeline
(HOROVOD_TIMELINE=DYNAMIC, hvd.start_timeline/stop_timeline), under hooprun -np 1 or 2.

Adasum is checked where its result is exact (orthogonal tensors add up, equal ones stay) and
against a float64 reference of the pairwise formula. Rank 0 prints "OK <check>" per check and
"OK adasum_timeline_test at np N" at the end.
"""

import json
import os
import shutil
import tempfile

import torch

import hoop.torch as hvd
from harness import check, ok

hvd.init()
R, N = hvd.rank(), hvd.size()
torch.set_num_threads(1)


def adasum_reference(vectors):
    """The pairwise combination over ranks 0..N-1 as the recursive doubling pairs them (exact
    for N = 1 and 2, the sizes this test runs at)."""
    def pair(a, b):
        dot = float((a * b).sum())
        na, nb = float((a * a).sum()), float((b * b).sum())
        ca = 1.0 - dot / (2 * na) if na > 0 else 1.0
        cb = 1.0 - dot / (2 * nb) if nb > 0 else 1.0
        return ca * a + cb * b

    level = [v.double() for v in vectors]
    while len(level) > 1:
        level = [pair(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def orthogonal(rank, shape, dtype):
    """Rank r owns the elements whose flat index is r modulo the size."""
    t = torch.zeros(shape, dtype=torch.float64).flatten()
    t[rank::N] = torch.arange(1, t[rank::N].numel() + 1, dtype=torch.float64) * (rank + 1) / 4
    return t.reshape(shape).to(dtype)


def check_adasum_allreduce():
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        mine = orthogonal(R, (5, 7), dtype)
        total = sum(orthogonal(r, (5, 7), torch.float64) for r in range(N)).to(dtype)
        got = hvd.allreduce(mine, op=hvd.Adasum, name=f"ortho.{dtype}")
        check(torch.equal(got, total), f"adasum of orthogonal {dtype}: {got} != {total}")
        same = torch.arange(12, dtype=dtype).reshape(3, 4) / 8
        check(torch.equal(hvd.allreduce(same, op=hvd.Adasum), same),
              f"adasum of equal {dtype} tensors changed them")
    g = torch.Generator().manual_seed(7 + R)
    mine = torch.randn(33, generator=g, dtype=torch.float64)
    everyone = hvd.allgather(mine.reshape(1, -1))
    got = hvd.allreduce(mine, op=hvd.Adasum, name="random")
    want = adasum_reference(list(everyone))
    check(torch.allclose(got, want, rtol=1e-12, atol=1e-12), f"adasum {got} != {want}")
    ok("allreduce op=Adasum: exact on orthogonal and equal tensors, f64 reference on random")

    # A group is not one vector: each tensor gets its own coefficients (no fusion).
    ortho, same = orthogonal(R, (6,), torch.float32), torch.full((4,), 0.5)
    outs = hvd.grouped_allreduce([ortho, same], op=hvd.Adasum, name="group")
    check(torch.equal(outs[0], sum(orthogonal(r, (6,), torch.float32) for r in range(N))),
          f"grouped adasum, orthogonal member: {outs[0]}")
    check(torch.equal(outs[1], same), f"grouped adasum, equal member: {outs[1]}")
    ok("grouped_allreduce op=Adasum combines each tensor on its own")

    try:
        hvd.allreduce(torch.ones(3, dtype=torch.int32), op=hvd.Adasum, name="ints")
        check(False, "adasum on int32 was not refused")
    except ValueError as e:
        check("floating-point" in str(e), f"adasum on int32: {e}")
    try:
        hvd.reducescatter(torch.ones(4, 2), op=hvd.Adasum, name="rs")
        check(False, "reducescatter with adasum was not refused")
    except ValueError as e:
        check("adasum" in str(e), f"reducescatter with adasum: {e}")
    ok("Adasum on integers and in reducescatter: ValueError naming the cause")


def check_adasum_optimizer():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    start = [p.detach().clone() for p in model.parameters()]
    g = torch.Generator().manual_seed(100 + R)
    x, y = torch.randn(8, 4, generator=g), torch.randn(8, 2, generator=g)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    local = [(-0.1 * p.grad).double() for p in model.parameters()]
    opt.step()
    for i, (p, s, d) in enumerate(zip(model.parameters(), start, local)):
        everyone = hvd.allgather(d.reshape(1, -1), name=f"delta.{i}")
        want = s.double() + adasum_reference(list(everyone)).reshape(s.shape)
        check(torch.allclose(p.double(), want, rtol=1e-5, atol=1e-6),
              f"parameter {i} after an Adasum step: {p} != {want}")
        same = hvd.allgather(p.detach().reshape(1, -1), name=f"param.{i}")
        check(all(torch.equal(row, same[0]) for row in same), f"parameter {i} differs by rank")
    ok("DistributedOptimizer(op=Adasum): the local steps' updates combined by Adasum")


def events_of(path):
    with open(path) as f:
        return json.load(f)


def check_dynamic_timeline():
    check(os.environ.get("HOROVOD_TIMELINE") == "DYNAMIC", "run me with HOROVOD_TIMELINE=DYNAMIC")
    check(not os.path.exists("DYNAMIC"), "HOROVOD_TIMELINE=DYNAMIC wrote a file named DYNAMIC")
    where = hvd.broadcast_object(tempfile.mkdtemp(prefix="hoop-tl-") if R == 0 else None, 0)
    try:
        hvd.allreduce(torch.ones(3), name="before.start")
        path = os.path.join(where, "timeline.json")
        hvd.start_timeline(path, mark_cycles=True)
        hvd.allreduce(torch.ones(3), name="while.on")
        hvd.stop_timeline()
        hvd.allreduce(torch.ones(3), name="after.stop")
        hvd.barrier()
        if R == 0:
            names = {e.get("args", {}).get("name") for e in events_of(path)}
            kinds = {e["name"] for e in events_of(path)}
            check("allreduce.while.on" in names, f"the timeline lacks the tensor: {names}")
            check("allreduce.before.start" not in names and "allreduce.after.stop" not in names,
                  f"the timeline holds tensors from outside start/stop: {names}")
            check("CYCLE_START" in kinds, f"mark_cycles wrote no cycle mark: {kinds}")
        else:
            check(len(os.listdir(where)) == 1, "a rank other than 0 wrote the timeline")
        ok("start_timeline/stop_timeline bracket what is recorded; rank 0 writes, cycles marked")
        # Every rank has looked at the folder before rank 0 writes its next file there.
        hvd.barrier()

        hvd.start_timeline(os.path.join(where, "rank%r.json"))
        hvd.allreduce(torch.ones(2), name="per.rank")
        hvd.stop_timeline()
        hvd.barrier()
        mine = {e.get("args", {}).get("name") for e in events_of(os.path.join(where,
                                                                               f"rank{R}.json"))}
        check("allreduce.per.rank" in mine, f"rank {R}'s own timeline lacks the tensor: {mine}")
        ok("start_timeline with %r: a file per rank")
    finally:
        hvd.barrier()
        if R == 0:
            shutil.rmtree(where, ignore_errors=True)


check_adasum_allreduce()
check_adasum_optimizer()
check_dynamic_timeline()
hvd.shutdown()
ok(f"adasum_timeline_test at np {N}")
