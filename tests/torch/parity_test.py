"""Three horovod.torch behaviours of issue #26: sparse_allreduce_async and sparse gradients
under DistributedOptimizer (item 7), a process set given as an empty list of ranks (item 10)
and SyncBatchNorm (item 14a).

Run under hooprun at -np 1 and -np 2. Every rank builds every rank's data from seeds, so the
references (dense sums, one optimizer fed the averaged gradient, one BatchNorm over the
concatenated batches) need no communication. Prints "OK <check>" on rank 0; any failure raises.
"""

import copy

import torch
from torch.nn.modules.batchnorm import _BatchNorm

import hoop.torch as hvd
from harness import check, ok

hvd.init()
R, N = hvd.rank(), hvd.size()
torch.set_num_threads(1)


def close(actual, expected, what, rtol=1e-4, atol=1e-5):
    check(tuple(actual.shape) == tuple(expected.shape),
          f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    diff = (actual.double() - expected.double()).abs().max().item() if actual.numel() else 0.0
    check(torch.allclose(actual.double(), expected.double(), rtol=rtol, atol=atol),
          f"{what}: differs by up to {diff}")


# --- item 7: sparse tensors --------------------------------------------------------------

def rows_input(k, empty=False):
    """Rank k's (10, 3) tensor with sparse rows (sparse_dim 1, as an embedding's gradient),
    listing one row twice; `empty` gives it no nonzero at all."""
    if empty:
        return torch.sparse_coo_tensor(torch.empty(1, 0, dtype=torch.int64), torch.empty(0, 3),
                                       (10, 3))
    g = torch.Generator().manual_seed(10 + k)
    rows = torch.randint(0, 10, (4 + k,), generator=g)
    rows[1] = rows[0]
    return torch.sparse_coo_tensor(rows.unsqueeze(0), torch.randn(4 + k, 3, generator=g), (10, 3))


def elements_input(k):
    """Rank k's (4, 5) tensor with sparse elements (sparse_dim 2), one index twice."""
    g = torch.Generator().manual_seed(20 + k)
    indices = torch.stack([torch.randint(0, 4, (3,), generator=g),
                           torch.randint(0, 5, (3,), generator=g)])
    indices[:, 2] = indices[:, 0]
    return torch.sparse_coo_tensor(indices, torch.randn(3, generator=g), (4, 5))


def check_sparse(result, inputs, divisor, what):
    check(result.is_sparse, f"{what}: result is not sparse")
    check(result.size() == inputs[0].size(), f"{what}: size {tuple(result.size())}")
    expected = sum(t.to_dense() for t in inputs) / divisor
    close(result.to_dense(), expected, what, rtol=1e-6, atol=1e-6)


def check_sparse_allreduce():
    everyone = [rows_input(k) for k in range(N)]
    h = hvd.sparse_allreduce_async(everyone[R], "parity.rows.avg", hvd.Average)
    check_sparse(hvd.synchronize(h), everyone, N, "sparse_allreduce_async Average")
    # Horovod returns a function to call for the result; its callers keep working.
    h = hvd.sparse_allreduce_async(everyone[R], "parity.rows.sum", hvd.Sum)
    check_sparse(h(), everyone, 1, "sparse_allreduce_async Sum, handle()")
    elements = [elements_input(k) for k in range(N)]
    h = hvd.sparse_allreduce_async(elements[R], None, hvd.Sum,
                                   process_set=hvd.global_process_set)
    while not hvd.poll(h):
        pass
    check_sparse(hvd.synchronize(h), elements, 1, "sparse_allreduce_async of elements, unnamed")
    # Rank 0 has no nonzero (at -np 1 nobody has): gathering zero rows must still work.
    some_empty = [rows_input(k, empty=(k == 0)) for k in range(N)]
    h = hvd.sparse_allreduce_async(some_empty[R], "parity.rows.empty", hvd.Average)
    check_sparse(hvd.synchronize(h), some_empty, N, "sparse_allreduce_async with an empty rank")
    for bad, args in [("op=Max", (everyone[R], "parity.bad", hvd.Max)),
                      ("a dense tensor", (torch.ones(3), "parity.bad", hvd.Sum))]:
        try:
            hvd.sparse_allreduce_async(*args)
            check(False, f"sparse_allreduce_async of {bad} must raise")
        except ValueError:
            pass
    ok("sparse_allreduce_async: Average, Sum, handle(), unnamed, empty ranks, misuse")


def embedding_batch(k, step):
    g = torch.Generator().manual_seed(100 * step + k)
    return torch.randint(0, 12, (3 + k, 4), generator=g), torch.randn(3 + k, 5, generator=g)


def embedding_loss(model, k, step):
    ids, target = embedding_batch(k, step)
    return ((model(ids).sum(1) - target) ** 2).mean()


def check_sparse_optimizer(sparse_as_dense, num_groups=0):
    what = f"SparseAdam, sparse_as_dense={sparse_as_dense}, num_groups={num_groups}"
    torch.manual_seed(0)
    model = torch.nn.Embedding(12, 5, sparse=True)
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(model.parameters()), lr=0.05),
                                   named_parameters=model.named_parameters(),
                                   sparse_as_dense=sparse_as_dense, num_groups=num_groups)
    ref_opt = torch.optim.SparseAdam(list(reference.parameters()), lr=0.05)
    for step in range(3):
        opt.zero_grad()
        embedding_loss(model, R, step).backward()
        opt.step()
        grad = model.weight.grad
        check(grad.is_sparse and grad.sparse_dim() == 1,
              f"{what}: the gradient is {grad.layout} with sparse_dim "
              f"{grad.sparse_dim() if grad.is_sparse else None} after step()")
        # The reference: every rank's gradient, averaged, applied to one model.
        total = None
        for k in range(N):
            reference.weight.grad = None
            embedding_loss(reference, k, step).backward()
            total = reference.weight.grad if total is None else total + reference.weight.grad
        reference.weight.grad = (total / N).coalesce()
        ref_opt.step()
    close(model.weight.detach(), reference.weight.detach(), f"{what}: against the reference",
          rtol=1e-5, atol=1e-5)
    everyone = hvd.allgather(model.weight.detach().flatten().unsqueeze(0))
    check(all(torch.equal(everyone[k], everyone[0]) for k in range(N)),
          f"{what}: parameters differ between ranks")
    ok(f"DistributedOptimizer with {what}: gradients stay sparse, parameters agree")


# --- item 10: an empty process set ---------------------------------------------------------

def check_whole_job_set(ps, what):
    check(ps.process_set_id not in (None, 0), f"{what}: id {ps.process_set_id}")
    check(ps.ranks == list(range(N)) and ps.size() == N, f"{what}: ranks {ps.ranks}")
    check(ps.included() and ps.rank() == R, f"{what}: rank {ps.rank()}")
    t = torch.arange(6.0).reshape(2, 3) * (R + 1)
    for op in (hvd.Sum, hvd.Average, hvd.Max):
        got = hvd.allreduce(t, op=op, process_set=ps)
        check(torch.equal(got, hvd.allreduce(t, op=op)), f"{what}: allreduce {op} {got}")
    got = hvd.broadcast(torch.tensor([R]), N - 1, process_set=ps)
    check(got.item() == N - 1, f"{what}: broadcast from rank {N - 1} gave {got}")
    got = hvd.allgather(torch.tensor([R]), process_set=ps)
    check(got.tolist() == list(range(N)), f"{what}: allgather {got}")


def check_empty_process_set():
    added = hvd.add_process_set([])
    check_whole_job_set(added, "add_process_set([])")
    given = hvd.add_process_set(hvd.ProcessSet([]))
    check_whole_job_set(given, "add_process_set(ProcessSet([]))")
    check(hvd.remove_process_set(given) and hvd.remove_process_set(added), "remove_process_set")
    hvd.shutdown()
    at_init = hvd.ProcessSet([])
    hvd.init(process_sets=[at_init])
    check_whole_job_set(at_init, "init(process_sets=[ProcessSet([])])")
    ok("an empty process set means every rank: add_process_set and init(process_sets=...)")


# --- item 14a: SyncBatchNorm ----------------------------------------------------------------

def bn_batch(k, step, channels, tail):
    """Rank k's batch of 3 + k samples, its mean shifted per rank so that local statistics
    differ from the global ones, and the weights of the loss sum(y * w)."""
    g = torch.Generator().manual_seed(1000 + 100 * step + k)
    x = torch.randn((3 + k, channels) + tail, generator=g) * (1 + k) + k
    return x, torch.randn(x.shape, generator=g)


def check_sync_batch_norm(what, tail=(), channels=4, input_grad=True, **kwargs):
    sync = hvd.SyncBatchNorm(channels, **kwargs)
    reference = (torch.nn.BatchNorm2d if len(tail) == 2 else torch.nn.BatchNorm1d)(channels,
                                                                                   **kwargs)
    if sync.affine:
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            sync.weight.copy_(torch.rand(channels, generator=g) + 0.5)
            sync.bias.copy_(torch.randn(channels, generator=g))
    reference.load_state_dict(sync.state_dict())
    rows = slice(sum(3 + k for k in range(R)), sum(3 + k for k in range(R + 1)))
    for step in range(2):
        batches = [bn_batch(k, step, channels, tail) for k in range(N)]
        x = batches[R][0].clone().requires_grad_(input_grad)
        y = sync(x)
        (y * batches[R][1]).sum().backward()
        everything = torch.cat([b[0] for b in batches]).requires_grad_(input_grad)
        expected = reference(everything)
        (expected * torch.cat([b[1] for b in batches])).sum().backward()
        close(y, expected[rows], f"{what}: output, step {step}")
        if input_grad:
            close(x.grad, everything.grad[rows], f"{what}: input gradient, step {step}")
        if sync.affine:
            # Each rank holds its own batch's share, as for any parameter.
            for name in ("weight", "bias"):
                mine = getattr(sync, name).grad
                close(hvd.allreduce(mine, op=hvd.Sum), getattr(reference, name).grad,
                      f"{what}: {name} gradient summed over ranks, step {step}")
            sync.zero_grad()
            reference.zero_grad()
        if sync.track_running_stats:
            close(sync.running_mean, reference.running_mean, f"{what}: running_mean")
            close(sync.running_var, reference.running_var, f"{what}: running_var")
            check(sync.num_batches_tracked.item() == step + 1, f"{what}: num_batches_tracked")
    sync.eval()
    reference.eval()
    batches = [bn_batch(k, 9, channels, tail) for k in range(N)]
    with torch.no_grad():
        close(sync(batches[R][0]), reference(torch.cat([b[0] for b in batches]))[rows],
              f"{what}: eval output")
    ok(f"SyncBatchNorm {what} matches one BatchNorm over every rank's batch")


def check_sync_batch_norms():
    check(issubclass(hvd.SyncBatchNorm, _BatchNorm), "SyncBatchNorm is a _BatchNorm")
    try:
        hvd.SyncBatchNorm(4)(torch.ones(4))
        check(False, "1-D input must raise")
    except ValueError:
        pass
    check_sync_batch_norm("(N, C)")
    check_sync_batch_norm("(N, C, H, W)", tail=(3, 2))
    check_sync_batch_norm("(N, C, L), C=3, momentum=None, affine=False", tail=(5,), channels=3,
                          momentum=None, affine=False)
    check_sync_batch_norm("(N, C, H, W), track_running_stats=False", tail=(2, 2),
                          track_running_stats=False)
    check_sync_batch_norm("(N, C), input without gradient", input_grad=False)


check_sparse_allreduce()
check_sparse_optimizer(sparse_as_dense=False)
check_sparse_optimizer(sparse_as_dense=True)
check_sparse_optimizer(sparse_as_dense=True, num_groups=1)
check_sync_batch_norms()
check_empty_process_set()
hvd.shutdown()
ok(f"parity_test at np {N}")
