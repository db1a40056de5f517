"""hoop.torch on CUDA tensors: every collective and DistributedOptimizer through the runtime's
device path (HOOP_GPU_BACKEND picks NCCL, hoop's CUDA IPC or staging), against references
computed locally on the CPU.

Run under hooprun on a machine with a GPU (ranks share the devices round-robin by local rank).
Where torch sees no GPU or hoop was built without CUDA, rank 0 prints "SKIP <why>" and every
rank exits 0. Prints "OK <check>" on rank 0; any failure raises.
"""

import math
import sys

import torch

import hoop
import hoop.torch as hvd
from harness import check, ok

if not torch.cuda.is_available() or not hoop._hoop.cuda_built():
    why = ("torch sees no CUDA device" if not torch.cuda.is_available()
           else "hoop was built without CUDA")
    print(f"SKIP {why}", flush=True)
    sys.exit(0)

hvd.init()
R, N = hvd.rank(), hvd.size()
DEV = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
torch.cuda.set_device(DEV)
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int32, torch.int64]


def rank_input(k, dtype, shape=(3, 5)):
    """Small integers (exact in every dtype and in sums over 8 ranks), different per rank, on
    the CPU; .to(DEV) puts them on the GPU."""
    return ((torch.arange(math.prod(shape)).reshape(shape) % 7) + k).to(dtype)


def close(actual, expected, dtype, what):
    check(actual.device == DEV, f"{what}: result on {actual.device}, expected {DEV}")
    check(actual.dtype == dtype, f"{what}: dtype {actual.dtype}, expected {dtype}")
    check(tuple(actual.shape) == tuple(expected.shape),
          f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(dtype, 1e-6)
    check(torch.allclose(actual.cpu().double(), expected.cpu().double(), rtol=tol, atol=tol),
          f"{what}: got {actual} expected {expected}")


def check_allreduce():
    for dtype in FLOATS + INTS:
        inputs = torch.stack([rank_input(k, torch.float64) for k in range(N)])
        mine = rank_input(R, dtype).to(DEV)
        for op, reduce in [(hvd.Sum, lambda s: s.sum(0)), (hvd.Min, lambda s: s.min(0).values),
                           (hvd.Max, lambda s: s.max(0).values)]:
            close(hvd.allreduce(mine, op=op), reduce(inputs), dtype, f"allreduce {dtype} {op}")
        if dtype.is_floating_point:
            close(hvd.allreduce(mine), inputs.mean(0), dtype, f"allreduce avg {dtype}")
    expected = sum(rank_input(k, torch.float64, (5, 3)) for k in range(N)).t()
    strided = rank_input(R, torch.float32, (5, 3)).to(DEV).t()
    check(hvd.allreduce_(strided, op=hvd.Sum) is strided, "allreduce_ returns its argument")
    close(strided, expected, torch.float32, "allreduce_ of a strided CUDA view")
    t = rank_input(R, torch.float32).to(DEV)
    close(hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25),
          sum(rank_input(k, torch.float64) for k in range(N)) * 0.5, torch.float32,
          "pre/postscale")
    empty = hvd.allreduce(torch.empty(0, 3, device=DEV))
    check(empty.shape == (0, 3) and empty.device == DEV, "empty CUDA allreduce")
    big = torch.full((1 << 20,), float(R + 1), device=DEV)  # 4 MiB: past every fusion size
    close(hvd.allreduce(big, op=hvd.Sum), torch.full((1 << 20,), N * (N + 1) / 2.0),
          torch.float32, "4 MiB allreduce")
    ok("allreduce of CUDA tensors: 8 dtypes x sum/min/max/avg, strided, scaled, empty, 4 MiB")


def check_producer_stream():
    # The input is written by a kernel still queued on torch's stream when allreduce starts:
    # hoop must wait for it rather than read stale memory.
    a = torch.randn(2048, 2048, device=DEV)
    x = torch.zeros(1 << 16, device=DEV)
    for _ in range(4):
        a = a @ a / 64.0  # long enough to still be running when allreduce is called
    x.fill_(R + 1.0)
    got = hvd.allreduce(x, op=hvd.Sum, name="after_kernels")
    close(got, torch.full((1 << 16,), N * (N + 1) / 2.0), torch.float32,
          "allreduce of a tensor written just before on torch's stream")
    handles = [hvd.allreduce_async(torch.full((1000,), float(i + R), device=DEV), op=hvd.Sum,
                                   name=f"async.{i}") for i in range(8)]
    for i, h in enumerate(handles):
        close(hvd.synchronize(h), torch.full((1000,), float(N * i + N * (N - 1) / 2)),
              torch.float32, f"async allreduce {i}")
    ok("inputs queued on torch's current stream are waited for; 8 async handles")


def check_grouped_and_others():
    specs = [(torch.float32, (3, 5)), (torch.float64, (7,)), (torch.int32, (2, 2, 2))]
    tensors = [rank_input(R, d, s).to(DEV) for d, s in specs]
    for o, (d, s) in zip(hvd.grouped_allreduce(tensors, op=hvd.Sum), specs):
        close(o, sum(rank_input(k, torch.float64, s) for k in range(N)), d, "grouped_allreduce")

    for dtype in [torch.float16, torch.float32, torch.int64]:
        mine = rank_input(R, dtype, (R + 1, 4)).to(DEV)  # first dimension differs per rank
        expected = torch.cat([rank_input(k, torch.float64, (k + 1, 4)) for k in range(N)])
        close(hvd.allgather(mine), expected, dtype, f"allgather {dtype}")

    root = N - 1
    for dtype in [torch.bfloat16, torch.float32, torch.uint8]:
        close(hvd.broadcast(rank_input(R, dtype).to(DEV), root), rank_input(root, torch.float64),
              dtype, f"broadcast {dtype}")

    splits = [(R + j) % 3 for j in range(N)]
    send = torch.cat([torch.full(((R + j) % 3, 2), 100.0 * R + j) for j in range(N)]).to(DEV)
    out, received = hvd.alltoall(send, splits=splits)
    close(out, torch.cat([torch.full(((k + R) % 3, 2), 100.0 * k + R) for k in range(N)]),
          torch.float32, "alltoall uneven")
    check(received.tolist() == [(k + R) % 3 for k in range(N)], f"received splits {received}")

    rows = 2 * N + 1
    share = [rows // N + (1 if k < rows % N else 0) for k in range(N)]
    start = sum(share[:R])
    total = sum(rank_input(k, torch.float64, (rows, 3)) for k in range(N))
    close(hvd.reducescatter(rank_input(R, torch.float32, (rows, 3)).to(DEV), op=hvd.Sum),
          total[start:start + share[R]], torch.float32, "reducescatter")
    ok("grouped allreduce, allgather, broadcast, alltoall, reducescatter of CUDA tensors")


def check_optimizer():
    # Averaged shard gradients on the GPU reproduce one process training on the global batch.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).to(DEV)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 4)).to(DEV)
    reference.load_state_dict(model.state_dict())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    B = 8
    for step in range(5):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(B * N, 8, generator=g).to(DEV)
        y = torch.randint(0, 4, (B * N,), generator=g).to(DEV)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[R * B:(R + 1) * B]),
                                          y[R * B:(R + 1) * B]).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        check(p.is_cuda and torch.allclose(p, q, atol=1e-5),
              f"parameter {name} differs from the one-process reference by "
              f"{(p - q).abs().max().item()}")
    ok("DistributedOptimizer on a CUDA model matches one process on the global batch")


def check_mismatched_memory():
    # Ranks must agree on host or device memory; the mismatch reaches every rank by name.
    t = torch.ones(4, device=DEV if R == 0 else "cpu")
    try:
        hvd.allreduce(t, name="host_vs_device")
        check(False, "a host/device mismatch must raise")
    except hoop.HoopError as e:
        check("host_vs_device" in str(e), f"the error names the tensor: {e}")
    got = hvd.allreduce(torch.ones(2, device=DEV), op=hvd.Sum, name="after_mismatch")
    close(got, torch.full((2,), float(N)), torch.float32, "allreduce after the mismatch")
    ok("one rank on the GPU and one on the CPU: HoopError naming the tensor on every rank")


check_allreduce()
check_producer_stream()
check_grouped_and_others()
check_optimizer()
if N > 1:
    check_mismatched_memory()
hvd.shutdown()
ok("done")
