"""One rank of the torch.distributed backend check: every collective through backend "hoop"
against the same call through a gloo group of the same ranks, on the same random inputs, for
every dtype both take, sync and async. Run under torchrun (or any env:// launcher), or under
hooprun with none of torch's variables:

    python3 -m torch.distributed.run --nproc_per_node=2 tests/torch/torchdist_check.py
    hooprun -np 4 python3 tests/torch/torchdist_check.py

Prints "rank R: torchdist checked N cases" and exits 0, or each FAIL and exits 1.
"""

import sys

import torch
import torch.distributed as dist

import hoop.torch  # noqa: F401  registers backend "hoop" (hoop.torch.distributed)
from torchdist_common import finish

# Every dtype gloo takes (torch 1.13's gloo has no int16, bfloat16 or bool reductions).
DTYPES = [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64, torch.uint8,
          torch.int8]
# f16 rounds after every operation, and gloo's ring adds in another order than hoop's rank
# order from 3 ranks on: a last-bit difference per operation.
TOLERANCE = {torch.float16: dict(rtol=4e-3, atol=4e-3)}
COUNTS = [0, 1, 7, 1031]
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT]

failures = []
cases = 0


def data(seed, count, dtype):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(count, generator=g, dtype=torch.float64).to(dtype)
    return torch.randint(0, 4, (count,), generator=g, dtype=torch.int64).to(dtype)


def same(what, got, want):
    global cases
    cases += 1
    if isinstance(got, (list, tuple)):
        for i, (g, w) in enumerate(zip(got, want)):
            same(f"{what}[{i}]", g, w)
        return
    if got.dtype.is_floating_point:
        ok = torch.allclose(got, want, **TOLERANCE.get(got.dtype, dict(rtol=1e-6, atol=1e-6)))
    else:
        ok = torch.equal(got, want)
    if not ok:
        failures.append(f"{what}: hoop {got.tolist()[:8]} gloo {want.tolist()[:8]}")


def run(what, call, make, gloo, async_op):
    """call(tensors, group, async_op) on fresh copies for hoop (the default group) and gloo."""
    mine = make()
    theirs = make()
    work = call(mine, None, async_op)
    if async_op:
        work.wait()
    # gloo (torch 1.13) dies of SIGFPE on an empty all_gather; an empty result needs no peer.
    if any(t.numel() > 0 for t in (theirs if isinstance(theirs, list) else [theirs])):
        call(theirs, gloo, False)
    same(f"{what}{' async' if async_op else ''}", mine, theirs)


def rooted_and_p2p(rank, size, gloo):
    """reduce, gather and scatter against gloo; reduce_scatter (which gloo lacks in torch
    1.13) against gloo's all_reduce; a ring of isend/irecv against the sender's data."""
    for dtype in (torch.float32, torch.int64):
        for count in (1, 7, 1031):
            seed = count * 7 + rank
            for op in OPS:
                for root in range(size):
                    # Only the root's tensor is defined afterwards.
                    mine, theirs = data(seed, count, dtype), data(seed, count, dtype)
                    dist.reduce(mine, root, op=op)
                    dist.reduce(theirs, root, op=op, group=gloo)
                    if rank == root:
                        same(f"reduce {dtype} x{count} {op} root {root}", mine, theirs)
            for root in range(size):
                mine = data(seed, count, dtype)
                run(f"gather {dtype} x{count} root {root}",
                    lambda outs, g, a, r=root: dist.gather(
                        mine, outs if rank == r else None, dst=r, group=g, async_op=a),
                    lambda: [torch.zeros(count, dtype=dtype) for _ in range(size)], gloo, False)
                parts = [data(seed * 31 + i, count, dtype) for i in range(size)]
                run(f"scatter {dtype} x{count} root {root}",
                    lambda out, g, a, r=root: dist.scatter(
                        out, parts if rank == r else None, src=r, group=g, async_op=a),
                    lambda: torch.zeros(count, dtype=dtype), gloo, False)
            chunks = [data(seed * 13 + i, count, dtype) for i in range(size)]
            out = torch.zeros(count, dtype=dtype)
            dist.reduce_scatter(out, chunks)
            want = torch.cat(chunks)
            dist.all_reduce(want, group=gloo)
            same(f"reduce_scatter {dtype} x{count}", out, want[rank * count:(rank + 1) * count])
            out = torch.zeros(count, dtype=dtype)
            dist.reduce_scatter_tensor(out, torch.cat(chunks))
            same(f"reduce_scatter_tensor {dtype} x{count}", out,
                 want[rank * count:(rank + 1) * count])
            if size > 1:
                to, frm = (rank + 1) % size, (rank - 1) % size
                got = torch.zeros(count, dtype=dtype)
                works = [dist.irecv(got, frm), dist.isend(data(seed * 5, count, dtype), to)]
                for w in works:
                    w.wait()
                same(f"isend/irecv ring {dtype} x{count}", got,
                     data(((count * 7 + frm) * 5), count, dtype))


def main():
    dist.init_process_group("hoop")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    seed = 0
    for dtype in DTYPES:
        for count in COUNTS:
            for async_op in (False, True):
                seed += 1
                base = seed * 100 + rank
                for op in OPS:
                    run(f"all_reduce {dtype} x{count} {op}",
                        lambda t, g, a, op=op: dist.all_reduce(t, op=op, group=g, async_op=a),
                        lambda: data(base, count, dtype), gloo, async_op)
                for root in range(size):
                    run(f"broadcast {dtype} x{count} root {root}",
                        lambda t, g, a, r=root: dist.broadcast(t, r, group=g, async_op=a),
                        lambda: data(base, count, dtype), gloo, async_op)
                mine = data(base, count, dtype)
                run(f"all_gather {dtype} x{count}",
                    lambda outs, g, a: dist.all_gather(outs, mine, group=g, async_op=a),
                    lambda: [torch.zeros(count, dtype=dtype) for _ in range(size)], gloo, async_op)
                run(f"all_gather_into_tensor {dtype} x{count}",
                    lambda out, g, a: dist.all_gather_into_tensor(out, mine, group=g, async_op=a)
                    if g is None else dist.all_gather(list(out.chunk(size)), mine, group=g),
                    lambda: torch.zeros(count * size, dtype=dtype), gloo, async_op)
                splits = [(r + rank) % 3 for r in range(size)]
                inp = data(base, sum(splits), dtype)
                recv = [(rank + r) % 3 for r in range(size)]
                run(f"all_to_all_single uneven {dtype}",
                    lambda out, g, a: dist.all_to_all_single(out, inp, recv, splits, group=g,
                                                             async_op=a),
                    lambda: torch.zeros(sum(recv), dtype=dtype), gloo, async_op)
    rooted_and_p2p(rank, size, gloo)
    dist.barrier()
    dist.barrier(group=gloo)
    if failures:
        failures[19:] = [f"{len(failures)} of {cases} cases differ"]
    return finish(failures, f"torchdist checked {cases} cases")


if __name__ == "__main__":
    sys.exit(main())
