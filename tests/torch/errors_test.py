"""hoop.torch's errors: what the runtime reports (mismatches, names in flight twice, sets this
rank is not in) reaches every rank as hoop.HoopError naming the tensor, and what the adapter
rejects (tensors on devices other than the CPU and CUDA, unsupported dtypes and ops) is a ValueError before any work starts.
The job keeps working after each. Run under hooprun -np 2 (or more).
"""

import torch

import hoop
import hoop.torch as hvd
from harness import check, ok

hvd.init()
R, N = hvd.rank(), hvd.size()


def expect_error(kind, fn, *needles):
    """Runs fn, which must raise `kind` whose text contains every needle."""
    try:
        fn()
    except kind as e:
        text = str(e)
        for needle in needles:
            check(needle in text, f"{kind.__name__} {text!r} should mention {needle!r}")
        return e
    raise AssertionError(f"rank {R}: expected {kind.__name__} from {fn}")


def still_works(what):
    got = hvd.allreduce(torch.ones(2), op=hvd.Sum, name=f"after.{what}")
    check(got.eq(N).all(), f"allreduce after {what}: {got}")


def check_mismatches():
    e = expect_error(hoop.HoopError,
                     lambda: hvd.allreduce(torch.ones(R + 1, 3), name="bad_shape"), "bad_shape")
    check(e.code == "mismatch", f"code {e.code!r}")
    check(e.message in str(e), "str(e) carries the message")
    still_works("shape mismatch")
    dtype = torch.float32 if R == 0 else torch.float64
    expect_error(hoop.HoopError, lambda: hvd.allreduce(torch.ones(4, dtype=dtype), name="bad_type"),
                 "bad_type")
    still_works("dtype mismatch")
    expect_error(hoop.HoopError,
                 lambda: hvd.allgather(torch.ones(2, R + 2), name="bad_gather"), "bad_gather")
    expect_error(hoop.HoopError,
                 lambda: hvd.broadcast(torch.ones(3), root_rank=R, name="bad_root"), "bad_root")
    op = hvd.Sum if R == 0 else hvd.Max
    expect_error(hoop.HoopError, lambda: hvd.allreduce(torch.ones(3), op=op, name="bad_op"),
                 "bad_op")
    expect_error(hvd.HorovodInternalError,
                 lambda: hvd.synchronize(hvd.allreduce_async(torch.ones(R + 2), name="bad_async")),
                 "bad_async")
    still_works("mismatches")
    ok("mismatched shape/dtype/root/op raise HoopError on every rank, naming the tensor")


def check_duplicate_name():
    # Each rank in turn submits a name no other rank has submitted yet, so it is still pending
    # when the same rank submits it again; the others wait on a gate meanwhile.
    handles = []
    for r in range(N):
        if r == R:
            handles.append(hvd.allreduce_async(torch.ones(3), name=f"twice{r}", op=hvd.Sum))
            e = expect_error(ValueError,
                             lambda: hvd.allreduce_async(torch.ones(3), name=f"twice{r}"),
                             f"twice{r}")
            check(isinstance(e, hoop.HoopError) and e.code == "invalid argument",
                  f"a HoopError with code invalid argument: {type(e)} {e.code!r}")
        hvd.allreduce(torch.ones(1), name=f"gate{r}")
    for r in range(N):
        if r != R:
            handles.append(hvd.allreduce_async(torch.ones(3), name=f"twice{r}", op=hvd.Sum))
    for h in handles:
        check(hvd.synchronize(h).eq(N).all(), "the first submission still completes")
    still_works("duplicate name")
    ok("a name in flight twice on one rank raises ValueError (a HoopError); the first completes")


def check_misuse_is_value_error():
    # Rows that do not split evenly without splits, and a scalar to reducescatter: Horovod
    # raises ValueError, before any work starts.
    if N > 1:  # any row count splits over one rank
        expect_error(ValueError, lambda: hvd.alltoall(torch.ones(N + 1)), "split evenly")
    expect_error(ValueError, lambda: hvd.reducescatter(torch.tensor(1.0)), "at least one")
    still_works("misuse")
    ok("alltoall rows that do not split and a scalar reducescatter raise ValueError")


def check_rejected_tensors():
    meta = torch.empty(3, device="meta")  # a non-CPU device that exists without a GPU
    for fn in [lambda: hvd.allreduce(meta), lambda: hvd.allgather(meta),
               lambda: hvd.broadcast_(meta, 0), lambda: hvd.alltoall(meta)]:
        expect_error(ValueError, fn, "meta", "CPU and CUDA tensors")
    for dtype in [torch.bool, torch.complex64]:
        expect_error(ValueError, lambda: hvd.allreduce(torch.zeros(3, dtype=dtype)), str(dtype))
    expect_error(ValueError, lambda: hvd.allreduce(torch.ones(3).to_sparse()), "sparse")
    expect_error(ValueError, lambda: hvd.allreduce(torch.ones(3), op=42), "unsupported reduce op")
    expect_error(TypeError, lambda: hvd.allgather([1, 2, 3]), "torch.Tensor")
    still_works("rejected tensors")
    ok("meta, bool/complex/int16, sparse tensors and Adasum raise ValueError")


def check_process_set_errors():
    solo = hvd.add_process_set([0])
    if R != 0:
        expect_error(hoop.HoopError, lambda: hvd.allreduce(torch.ones(1), process_set=solo))
    expect_error(ValueError, lambda: hvd.broadcast(torch.ones(1), N, process_set=solo),
                 "not a member")
    hvd.remove_process_set(solo)
    expect_error(ValueError, lambda: hvd.allreduce(torch.ones(1), process_set=solo),
                 "not registered")
    still_works("process set errors")
    ok("process sets: non-members, foreign roots and removed sets raise")


if N > 1:  # one rank cannot disagree with another
    check_mismatches()
check_duplicate_name()
check_misuse_is_value_error()
check_rejected_tensors()
check_process_set_errors()
hvd.shutdown()
ok(f"errors_test at np {N}")
