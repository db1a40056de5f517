"""What the torch.distributed backend's test scripts share: comparing a training's parameters
with gloo's, and ending a rank with its failures or its success line."""

import torch
import torch.distributed as dist


def compare_parameters(what, mine, theirs, failures):
    """Appends to `failures` each parameter of `mine` that differs from `theirs` beyond float
    rounding (the backends may sum in different orders)."""
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if not torch.allclose(a, b, rtol=1e-6, atol=1e-7):
            failures.append(f"{what}: parameter {i} differs from gloo's by "
                            f"{(a - b).abs().max().item():.3g}")


def finish(failures, success):
    """Prints this rank's failures and returns 1, or prints "rank R: <success>", ends the
    process groups and returns 0."""
    rank = dist.get_rank()
    if failures:
        for f in failures[:20]:
            print(f"FAIL rank {rank}: {f}")
        return 1
    print(f"rank {rank}: {success}")
    dist.destroy_process_group()
    return 0
