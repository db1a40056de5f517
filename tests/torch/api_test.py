"""Every hoop.torch collective against a reference computed locally with torch.

Run under hooprun at -np 2 and -np 3 (uneven splits and rows need an odd size to bite). Each
rank builds every rank's input itself (they depend only on the rank), so the expected
results need no communication. Prints "OK <check>" on rank 0; any failure raises.
"""

import math
import os
import warnings

import torch

import hoop
import hoop.torch as hvd
from harness import check, ok

hvd.init()
R, N = hvd.rank(), hvd.size()
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def close(actual, expected, dtype, what):
    tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(dtype, 1e-6)
    check(actual.dtype == dtype, f"{what}: dtype {actual.dtype}, expected {dtype}")
    check(tuple(actual.shape) == tuple(expected.shape),
          f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    check(torch.allclose(actual.double(), expected.double(), rtol=tol, atol=tol),
          f"{what}: got {actual} expected {expected}")


def rank_input(k, dtype, shape=(3, 5)):
    """Small integers (exact in every dtype and in sums over 4 ranks), different per rank."""
    return ((torch.arange(math.prod(shape)).reshape(shape) % 7) + k).to(dtype)


def check_basics():
    check(hvd.is_initialized(), "is_initialized")
    check(0 <= R < N and 0 <= hvd.local_rank() < hvd.local_size(), "rank ranges")
    check(0 <= hvd.cross_rank() < hvd.cross_size(), "cross ranks")
    check(not hvd.mpi_enabled() and hvd.cuda_built() == hoop._hoop.cuda_built()
          and hvd.nccl_built() == hoop._hoop.nccl_built(), "build flags")
    # The build's own answer (CMake's HOOP_HAVE_MPI), not the binding's echo of itself.
    built_mpi = os.environ.get("HOOP_TEST_MPI_BUILT") == "1"
    check(hvd.mpi_built() == built_mpi, f"mpi_built() is {hvd.mpi_built()}, the build says {built_mpi}")
    # Horovod's nccl_built() is NCCL_VERSION_CODE (0 without NCCL), which scripts compare with
    # versions (its own tests skip alltoall below 2700).
    built_nccl = os.environ.get("HOOP_TEST_NCCL_BUILT") == "1"
    code = hvd.nccl_built()
    check(type(code) is int and (code >= 2700 if built_nccl else code == 0),
          f"nccl_built() is {code!r}, the build says NCCL {built_nccl}")
    check(hvd.global_process_set.ranks == list(range(N)), "global set ranks")
    check(hoop.__version__ == "0.1.0" and hvd.HorovodInternalError is hoop.HoopError, "exports")
    ok("basics")


def check_allreduce():
    ops = [(hvd.Sum, lambda s: s.sum(0)), (hvd.Min, lambda s: s.min(0).values),
           (hvd.Max, lambda s: s.max(0).values)]
    for dtype in FLOATS + INTS:
        inputs = torch.stack([rank_input(k, torch.float64) for k in range(N)])
        mine = rank_input(R, dtype)
        before = mine.clone()
        for op, reduce in ops:
            close(hvd.allreduce(mine, op=op), reduce(inputs), dtype, f"allreduce {dtype} {op}")
        check(torch.equal(mine, before), "allreduce must not modify its input")
        if dtype.is_floating_point:
            close(hvd.allreduce(mine), inputs.mean(0), dtype, f"allreduce avg {dtype}")
        small = torch.full((4,), 1 + R % 2, dtype=dtype)  # products are powers of two
        expected = torch.full((4,), float(math.prod(1 + k % 2 for k in range(N))))
        close(hvd.allreduce(small, op=hvd.Product), expected, dtype, f"allreduce prod {dtype}")
    ok("allreduce sum/min/max/avg/prod over 8 dtypes")

    scalar = hvd.allreduce(torch.tensor(float(R)), op=hvd.Sum)
    check(scalar.dim() == 0 and scalar.item() == N * (N - 1) / 2, f"0-dim allreduce {scalar}")
    empty = hvd.allreduce(torch.empty(0, 3))
    check(empty.shape == (0, 3), "empty allreduce")
    ok("allreduce of a scalar and an empty tensor")

    t = rank_input(R, torch.float32)
    expected_sum = sum(rank_input(k, torch.float64) for k in range(N))
    close(hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25),
          expected_sum * 0.5, torch.float32, "pre/postscale")
    close(hvd.allreduce(t, op=hvd.Average, prescale_factor=1 / 3, postscale_factor=3.0),
          expected_sum / N, torch.float32, "predivided average")
    # Integer tensors scale in float64 and go back truncated, as in Horovod.
    ints = torch.tensor([3, -3, 7], dtype=torch.int32) + R
    pre = [(torch.tensor([3, -3, 7], dtype=torch.float64) + k) * 1.5 for k in range(N)]
    want = (sum(p.trunc() for p in pre) * 0.5).trunc().to(torch.int32)
    got = hvd.allreduce(ints, op=hvd.Sum, prescale_factor=1.5, postscale_factor=0.5)
    check(got.dtype == torch.int32 and got.equal(want), f"int32 pre/postscale: {got} != {want}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        close(hvd.allreduce(t, average=False), expected_sum, torch.float32, "average=False")
        close(hvd.allreduce(t, average=True), expected_sum / N, torch.float32, "average=True")
    try:
        hvd.allreduce(t, average=True, op=hvd.Sum)
        check(False, "average and op together must raise")
    except ValueError:
        pass
    ok("allreduce scales and the deprecated average flag")

    inplace = rank_input(R, torch.float64)
    same = hvd.allreduce_(inplace, op=hvd.Sum)
    check(same is inplace, "allreduce_ returns its argument")
    close(inplace, expected_sum, torch.float64, "allreduce_")
    strided = rank_input(R, torch.float32, (5, 3)).t()  # non-contiguous view
    check(not strided.is_contiguous(), "test setup: strided view")
    hvd.allreduce_(strided, op=hvd.Sum)
    close(strided, sum(rank_input(k, torch.float64, (5, 3)) for k in range(N)).t(),
          torch.float32, "allreduce_ on a non-contiguous view")
    close(hvd.allreduce(strided.t().t(), op=hvd.Max), strided.double(), torch.float32,
          "allreduce of a non-contiguous input")
    ok("allreduce_ in place, contiguous and strided")

    handles = [hvd.allreduce_async(rank_input(R, torch.float32) * i, name=f"async.{i}",
                                   op=hvd.Sum) for i in range(4)]
    handles.append(hvd.allreduce_async_(rank_input(R, torch.float32), op=hvd.Sum))
    while not all(hvd.poll(h) for h in handles):
        pass
    results = [hvd.synchronize(h) for h in handles]
    for i in range(4):
        close(results[i], expected_sum * i, torch.float32, f"async allreduce {i}")
    close(results[4], expected_sum, torch.float32, "allreduce_async_")
    check(hvd.synchronize(handles[0]) is None, "a synchronized handle is forgotten")
    ok("allreduce_async/allreduce_async_ + poll + synchronize")


def check_grouped():
    specs = [(torch.float32, (3, 5)), (torch.float64, (7,)), (torch.int32, (2, 2, 2))]
    tensors = [rank_input(R, d, s) for d, s in specs]
    expected = [sum(rank_input(k, torch.float64, s) for k in range(N)) for _, s in specs]
    out = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="grp")
    for o, e, (d, _) in zip(out, expected, specs):
        close(o, e, d, "grouped_allreduce")
    out = hvd.synchronize(hvd.grouped_allreduce_async(tensors, op=hvd.Sum))
    for o, e, (d, _) in zip(out, expected, specs):
        close(o, e, d, "grouped_allreduce_async")
    floats = [rank_input(R, torch.float32), rank_input(R, torch.float32, (5, 3)).t()]
    result = hvd.grouped_allreduce_(floats)
    check(result[0] is floats[0] and result[1] is floats[1], "grouped_allreduce_ returns inputs")
    close(floats[0], expected[0] / N, torch.float32, "grouped_allreduce_ avg")
    close(floats[1], sum(rank_input(k, torch.float64, (5, 3)) for k in range(N)).t() / N,
          torch.float32, "grouped_allreduce_ strided")
    h = hvd.grouped_allreduce_async_([rank_input(R, torch.float64)], op=hvd.Max)
    close(hvd.synchronize(h)[0], rank_input(N - 1, torch.float64), torch.float64,
          "grouped_allreduce_async_")
    ok("grouped_allreduce (mixed dtypes), _async, _ and _async_")


def check_allgather():
    for dtype in FLOATS + INTS:
        mine = rank_input(R, dtype, (R + 1, 4))  # first dimension differs per rank
        expected = torch.cat([rank_input(k, torch.float64, (k + 1, 4)) for k in range(N)])
        close(hvd.allgather(mine), expected, dtype, f"allgather {dtype}")
    mine = torch.full((0 if R == N - 1 else 2, 3), float(R))  # the last rank gives no rows
    expected = torch.cat([torch.full((0 if k == N - 1 else 2, 3), float(k)) for k in range(N)])
    close(hvd.synchronize(hvd.allgather_async(mine, name="ag")), expected, torch.float32,
          "allgather_async with an empty contribution")
    outs = hvd.grouped_allgather([torch.tensor([R]), torch.full((R, 2), R, dtype=torch.int8)])
    close(outs[0], torch.arange(N), torch.int64, "grouped_allgather 0")
    close(outs[1], torch.cat([torch.full((k, 2), k) for k in range(N)]), torch.int8,
          "grouped_allgather 1")
    leaves = [torch.ones(R + 1, 2, requires_grad=True), torch.ones(2, requires_grad=True)]
    sum(o.sum() for o in hvd.grouped_allgather(leaves, name="gag.grad")).backward()
    check(all(leaf.grad is not None and leaf.grad.shape == leaf.shape and leaf.grad.eq(1).all()
              for leaf in leaves), f"grouped_allgather gradients: {[l.grad for l in leaves]}")
    ok("allgather with different first dims, empty rows, async and grouped (with gradients)")


def check_broadcast():
    root = N - 1
    for dtype in FLOATS + INTS:
        mine = rank_input(R, dtype)
        got = hvd.broadcast(mine, root)
        close(got, rank_input(root, torch.float64), dtype, f"broadcast {dtype}")
        check(torch.equal(mine, rank_input(R, dtype)), "broadcast must not modify its input")
    t = rank_input(R, torch.float32)
    check(hvd.broadcast_(t, root, name="bc") is t, "broadcast_ returns its argument")
    close(t, rank_input(root, torch.float64), torch.float32, "broadcast_")
    strided = rank_input(R, torch.float64, (5, 3)).t()
    hvd.synchronize(hvd.broadcast_async_(strided, root))
    close(strided, rank_input(root, torch.float64, (5, 3)).t(), torch.float64,
          "broadcast_async_ strided")
    got = hvd.synchronize(hvd.broadcast_async(rank_input(R, torch.int64), 0))
    close(got, rank_input(0, torch.float64), torch.int64, "broadcast_async")
    ok(f"broadcast from root {root}, in place, async, strided")


def check_alltoall():
    # Rank k sends (k + j) % 3 rows to rank j (some zero); rows are tagged 100*k + j.
    def rows(k, j):
        return (k + j) % 3

    splits = [rows(R, j) for j in range(N)]
    send = torch.cat([torch.full((rows(R, j), 2), 100.0 * R + j) for j in range(N)])
    expected = torch.cat([torch.full((rows(k, R), 2), 100.0 * k + R) for k in range(N)])
    out, received = hvd.alltoall(send, splits=splits)
    close(out, expected, torch.float32, "alltoall uneven")
    check(received.dtype == torch.int32 and received.tolist() == [rows(k, R) for k in range(N)],
          f"received splits {received}")
    out, received = hvd.synchronize(hvd.alltoall_async(send, torch.tensor(splits), name="a2a"))
    close(out, expected, torch.float32, "alltoall_async with a splits tensor")
    even = torch.arange(2 * N, dtype=torch.int64) + 10 * R
    out = hvd.alltoall(even)
    check(isinstance(out, torch.Tensor), "alltoall without splits returns only the tensor")
    close(out, torch.tensor([10 * k + 2 * R + i for k in range(N) for i in range(2)]),
          torch.int64, "alltoall even")
    # Without splits every rank splits its own rows evenly, and the ranks' row counts may
    # differ: rank k sends k + 1 rows to every rank (it has N * (k + 1)), tagged 100*k + j.
    mine = torch.cat([torch.full((R + 1, 2), 100.0 * R + j) for j in range(N)])
    want = torch.cat([torch.full((k + 1, 2), 100.0 * k + R) for k in range(N)])
    close(hvd.alltoall(mine), want, torch.float32, "alltoall without splits, rows differing")
    # ... and its gradient goes back to each rank in that rank's own shape.
    leaf = mine.clone().requires_grad_(True)
    hvd.alltoall(leaf).sum().backward()
    check(leaf.grad is not None and leaf.grad.shape == mine.shape and leaf.grad.eq(1).all(),
          f"alltoall gradient with rows differing: {leaf.grad}")
    ok("alltoall uneven/even, received splits, async, rows differing without splits")


def check_reducescatter():
    rows = 2 * N + 1  # uneven: the first rank gets one more row
    share = [rows // N + (1 if k < rows % N else 0) for k in range(N)]
    start = sum(share[:R])
    total = sum(rank_input(k, torch.float64, (rows, 3)) for k in range(N))
    for dtype in [torch.float32, torch.float64, torch.int32, torch.bfloat16]:
        got = hvd.reducescatter(rank_input(R, dtype, (rows, 3)), op=hvd.Sum)
        close(got, total[start:start + share[R]], dtype, f"reducescatter sum {dtype}")
    got = hvd.reducescatter(rank_input(R, torch.float32, (rows, 3)))
    close(got, total[start:start + share[R]] / N, torch.float32, "reducescatter average")
    got = hvd.synchronize(hvd.reducescatter_async(rank_input(R, torch.float32, (rows, 3)),
                                                  name="rs", op=hvd.Max))
    close(got, rank_input(N - 1, torch.float64, (rows, 3))[start:start + share[R]],
          torch.float32, "reducescatter_async max")
    got = hvd.grouped_reducescatter([rank_input(R, torch.float64, (rows, 3))], op=hvd.Sum)
    close(got[0], total[start:start + share[R]], torch.float64, "grouped_reducescatter")
    # Gradients as Horovod computes them: the gathered gradient, times the set's size for Sum.
    for op, factor in [(hvd.Sum, N), (hvd.Average, 1)]:
        leaf = torch.ones(N * 2, 3, requires_grad=True)
        hvd.reducescatter(leaf, op=op, name=f"rs.grad.{factor}").sum().backward()
        check(leaf.grad is not None and leaf.grad.eq(factor).all(),
              f"reducescatter gradient with op {op}: {leaf.grad}")
    # The grouped forms have gradients too: the same as one tensor's, per tensor.
    leaves = [torch.ones(N * 2, 3, requires_grad=True), torch.ones(N, requires_grad=True)]
    outs = hvd.grouped_reducescatter(leaves, op=hvd.Sum, name="grs.grad")
    sum(o.sum() for o in outs).backward()
    check(all(leaf.grad is not None and leaf.grad.eq(N).all() for leaf in leaves),
          f"grouped_reducescatter gradients: {[leaf.grad for leaf in leaves]}")
    ok(f"reducescatter of {rows} rows: sum/avg/max, async, grouped, gradients")


def check_join():
    # Rank k runs k + 1 steps; the ranks that joined count as zeros in the others' sums, and
    # an average is over all N ranks (Horovod's semantics).
    for step in range(R + 1):
        got = hvd.allreduce(torch.ones(3), name=f"join.step{step}", op=hvd.Sum)
        active = sum(1 for k in range(N) if k >= step)
        close(got, torch.full((3,), float(active)), torch.float32, f"join step {step}")
        got = hvd.allreduce(torch.ones(3), name=f"join.avg{step}", op=hvd.Average)
        close(got, torch.full((3,), active / N), torch.float32, f"join average step {step}")
    if R == N - 1 and N > 1:
        # Only an allreduce takes a joined rank's part: an allgather is an error, as in Horovod.
        try:
            hvd.allgather(torch.ones(1), name="join.allgather")
            raise AssertionError(f"rank {R}: allgather with joined ranks must raise")
        except hoop.HoopError as e:
            check("joined" in str(e), f"the error names the joined ranks: {e}")
    last = hvd.join()
    check(last == N - 1, f"join returned {last}, expected {N - 1}")
    hvd.barrier()
    ok("join with uneven steps, barrier")


def check_process_sets():
    if N == 1:
        return  # no odd ranks: [] would mean every rank (parity_test covers that)
    evens = hvd.add_process_set([k for k in range(N) if k % 2 == 0])
    odds = hvd.add_process_set(hvd.ProcessSet([k for k in range(N) if k % 2 == 1]))
    mine, other = (evens, odds) if R % 2 == 0 else (odds, evens)
    check(mine.included() and not other.included(), "included()")
    check(mine.size() == len(mine.ranks) and mine.rank() == mine.ranks.index(R), "size/rank")
    got = hvd.allreduce(torch.tensor([float(R)]), op=hvd.Sum, process_set=mine)
    check(got.item() == sum(mine.ranks), f"allreduce in {mine}: {got}")
    root = mine.ranks[-1]
    got = hvd.broadcast(torch.tensor([R]), root, process_set=mine)
    check(got.item() == root, f"broadcast in {mine} from global rank {root}: {got}")
    got = hvd.allgather(torch.tensor([R]), process_set=mine)
    check(got.tolist() == mine.ranks, f"allgather in {mine}: {got}")
    hvd.barrier(process_set=mine)
    check(hvd.broadcast_object(f"from {root}", root, process_set=mine) == f"from {root}",
          "broadcast_object in a set")
    check(hvd.remove_process_set(odds) and hvd.remove_process_set(evens), "remove_process_set")
    check(not hvd.remove_process_set(hvd.global_process_set), "the global set stays")
    check(mine.process_set_id is None and mine.size() is None, "removed sets are unregistered")
    ok("process sets: add/remove, allreduce/broadcast/allgather/barrier/objects in a set")


def check_objects():
    obj = {"from": N - 1, "data": [1, 2, (3, "x")]} if R == N - 1 else None
    got = hvd.broadcast_object(obj, root_rank=N - 1)
    check(got == {"from": N - 1, "data": [1, 2, (3, "x")]}, f"broadcast_object: {got}")
    check(hvd.broadcast_object(R * 10) == 0, "broadcast_object default root 0")
    got = hvd.allgather_object({"rank": R, "pad": "y" * R})
    check(got == [{"rank": k, "pad": "y" * k} for k in range(N)], f"allgather_object: {got}")
    ok("broadcast_object / allgather_object")


def check_autograd_and_compression():
    x = torch.full((3,), float(R + 1), requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum)
    (y * torch.arange(3.0)).sum().backward()
    close(x.grad, torch.arange(3.0) * N, torch.float32, "allreduce backward")
    x = torch.full((R + 1, 2), 1.0, requires_grad=True)
    hvd.allgather(x).sum().backward()
    close(x.grad, torch.ones(R + 1, 2), torch.float32, "allgather backward")
    t = rank_input(R, torch.float32) / 8
    got = hvd.allreduce(t, compression=hvd.Compression.fp16, op=hvd.Sum)
    check(got.dtype == torch.float32, "fp16 compression restores the dtype")
    close(got, sum(rank_input(k, torch.float64) for k in range(N)) / 8, torch.float32,
          "allreduce with fp16 compression")
    state = {"w": torch.full((2, 2), float(R)), "b": torch.tensor([R])}
    hvd.broadcast_parameters(state, root_rank=N - 1)
    check(state["w"].eq(N - 1).all() and state["b"].item() == N - 1, "broadcast_parameters dict")
    pairs = [("p", torch.nn.Parameter(torch.full((3,), float(R))))]
    hvd.broadcast_parameters(pairs, root_rank=0)
    check(pairs[0][1].eq(0).all(), "broadcast_parameters pairs")
    ok("autograd through allreduce/allgather, fp16 compression, broadcast_parameters")


def check_reinit():
    hvd.shutdown()
    check(not hvd.is_initialized(), "shutdown")
    pair = hvd.ProcessSet([0, 1] if N > 1 else [0])
    hvd.init(process_sets=[pair])
    check(pair.process_set_id is not None, "init(process_sets=...) registers the sets")
    if pair.included():
        got = hvd.allreduce(torch.tensor([1.0]), op=hvd.Sum, process_set=pair)
        check(got.item() == len(pair.ranks), f"allreduce in the static set: {got}")
    got = hvd.allreduce(torch.tensor([1.0]), op=hvd.Sum)
    check(got.item() == N, "allreduce after re-init")
    ok("shutdown, then init(process_sets=[...]) again")


for run in [check_basics, check_allreduce, check_grouped, check_allgather, check_broadcast,
            check_alltoall, check_reducescatter, check_join, check_process_sets, check_objects,
            check_autograd_and_compression, check_reinit]:
    run()
hvd.shutdown()
ok(f"api_test at np {N}")
