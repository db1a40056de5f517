"""DistributedOptimizer(op=Adasum): each rank takes the wrapped optimizer's step on its own
gradients, and the ranks then combine their parameter updates with Adasum, as
horovod.torch does for op=hvd.Adasum.

Combining updates rather than gradients is what lets Adasum work with adaptive optimizers
(Adam's per-parameter scaling is applied before the combination). Updates that point the same
way are averaged, orthogonal ones added: the effective learning rate adapts to how much the
ranks' gradients agree.
"""

import torch

from hoop.torch.basics import Adasum
from hoop.torch.mpi_ops import grouped_allreduce_async_, synchronize


class _DistributedAdasumOptimizer:
    """Mixed in ahead of the wrapped optimizer's class (see DistributedOptimizer)."""

    def __init__(self, params, named_parameters, process_set):
        super().__init__(params)
        self.process_set = process_set
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            names = {p: name for name, p in named_parameters}
            self._name = "adasum." + ".".join(sorted(names.get(p, "") for p in params))[:200]
        else:
            self._name = None
        self._params = params

    def synchronize(self):
        """Nothing to wait for: the ranks combine updates in step(), not gradients."""

    def step(self, closure=None):
        """Takes the local step, then replaces each parameter's update by the Adasum of every
        rank's update. Parameters without a gradient on any rank still take part (their update
        is zero there), so that every rank submits the same tensors."""
        with torch.no_grad():
            starts = [p.detach().clone() for p in self._params]
        loss = super().step(closure)
        if not (self.process_set.included() and self.process_set.size() > 1):
            return loss
        with torch.no_grad():
            deltas = [(p.detach() - s).contiguous() for p, s in zip(self._params, starts)]
            synchronize(grouped_allreduce_async_(deltas, name=self._name, op=Adasum,
                                                 process_set=self.process_set))
            for p, s, d in zip(self._params, starts, deltas):
                p.copy_(s + d)
        return loss


def make_adasum_optimizer(optimizer, named_parameters, process_set):
    """The Adasum variant of DistributedOptimizer for `optimizer` (a new subclass of its class
    sharing its param_groups)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.dtype.is_floating_point:
                raise ValueError(f"op=Adasum needs floating-point parameters, not {p.dtype}")
    named = list(named_parameters) if named_parameters is not None else None
    cls = type(optimizer.__class__.__name__, (_DistributedAdasumOptimizer, optimizer.__class__),
               {})
    return cls(optimizer.param_groups, named, process_set)
