"""DistributedOptimizer: wraps a torch optimizer so that gradients are averaged over the ranks
before each step (horovod.torch.DistributedOptimizer).

A hook on each parameter's gradient accumulator starts that gradient's allreduce as soon as
backward() has produced it, so communication overlaps the rest of the backward pass; step()
(or synchronize()) waits for all of them.
"""

import warnings
from contextlib import contextmanager

import torch

from hoop.torch.adasum_optimizer import make_adasum_optimizer
from hoop.torch.basics import Adasum, Average
from hoop.torch.compression import Compression
from hoop.torch.mpi_ops import (allreduce_async_, grouped_allreduce_async_,
                                sparse_allreduce_async, synchronize)
from hoop.torch.process_sets import global_process_set


def _dense(grad):
    """What a dense allreduce reduces for a gradient: itself, or a dense copy of a sparse one."""
    return grad.to_dense() if grad.is_sparse else grad


def _put_back(p, reduced):
    """Stores a dense reduction result as p's gradient, in p.grad's own layout."""
    if p.grad.is_sparse:
        # Sparse optimizers (torch.optim.SparseAdam) refuse dense gradients. Converting with
        # p.grad's sparse dimensions keeps whole rows for an embedding, as its own gradient has.
        p.grad = reduced.to_sparse(p.grad.sparse_dim())
    else:
        p.grad.set_(reduced)


class _DistributedOptimizer:
    """Mixed in ahead of the wrapped optimizer's class (see DistributedOptimizer)."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set):
        super().__init__(params)
        self._compression = compression
        self._parameter_names = self._names(named_parameters)
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for p in self._parameter_names}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        # p, or a tuple of parameters reduced together -> (handle or None, compression ctx).
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._p_to_group = {}
        self._group_counts = {}
        if process_set.included() and process_set.size() > 1:
            self._register_hooks(groups)

    def _names(self, named_parameters):
        """Parameter -> allreduce name; every parameter of every group must have one."""
        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            return {p: f"allreduce.noname.{i}" for i, p in enumerate(all_params)}
        named_parameters = list(named_parameters)
        if any(not isinstance(item, tuple) for item in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")
        seen, dups = set(), set()
        for name, _ in named_parameters:
            (dups if name in seen else seen).add(name)
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. "
                             f"Found duplicates: {', '.join(sorted(dups))}")
        names = {p: name for name, p in named_parameters}
        unnamed = [p for p in all_params if p not in names]
        if unnamed:
            raise ValueError("named_parameters was specified, but one or more model parameters "
                             f"were not named ({len(unnamed)} of {len(all_params)}).")
        return names

    def _register_hooks(self, groups):
        trainable = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        for group in self._form_groups(groups, trainable):
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0
        for p in trainable:
            self._requires_update.add(p)
            # The AccumulateGrad node of p: it runs once p.grad holds this pass's gradient.
            grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
            grad_acc.register_hook(self._make_hook(p))
            self._grad_accs.append(grad_acc)

    def _form_groups(self, groups, trainable):
        """Tuples of parameters to reduce as one grouped allreduce. groups: None (each
        parameter alone), a number of groups (parameters split evenly in name order, which
        every rank shares), or explicit lists of parameters."""
        if groups is None or groups == 0:
            return []
        if isinstance(groups, int):
            ordered = sorted(trainable, key=lambda p: self._parameter_names[p])
            size, extra = divmod(len(ordered), groups)
            result, start = [], 0
            for i in range(groups):
                end = start + size + (1 if i < extra else 0)
                if end > start:
                    result.append(tuple(ordered[start:end]))
                start = end
            return result
        wanted = set(trainable)
        return [tuple(p for p in group if p in wanted) for group in groups
                if any(p in wanted for p in group)]

    def _scales(self):
        # The runtime's average divides by the set size after the sum: 1/f before and f after
        # leave a plain average, with the sum taken over values already divided by f.
        if self.op == Average:
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        name = self._parameter_names[p]
        if p.grad.is_sparse and not self.sparse_as_dense:
            return self._sparse_allreduce_grad_async(p, name), None
        compressed, ctx = self._compression.compress(_dense(p.grad))
        prescale, postscale = self._scales()
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group):
        # A group is one fused allreduce, so its sparse gradients go dense whatever
        # sparse_as_dense says; _put_back makes them sparse again.
        compressed, ctxs = zip(*[self._compression.compress(_dense(p.grad)) for p in group])
        prescale, postscale = self._scales()
        handle = grouped_allreduce_async_(list(compressed), name=self._parameter_names[group[0]],
                                          op=self.op, prescale_factor=prescale,
                                          postscale_factor=postscale,
                                          process_set=self.process_set)
        return handle, ctxs

    def _sparse_allreduce_grad_async(self, p, name):
        """A sparse gradient is gathered (indices and values of every rank) rather than
        reduced; duplicate indices add up when the result is used."""
        return sparse_allreduce_async(p.grad, name=name, op=self.op,
                                      process_set=self.process_set)

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times "
                        "before call to step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] > 0:
                self._handles[p] = (None, None)
                return
            group = self._p_to_group.get(p)
            if group is None:
                self._handles[p] = self._allreduce_grad_async(p)
                return
            self._handles.pop(p, None)
            self._group_counts[group] += 1
            if self._group_counts[group] == len(group):
                self._handles[group] = self._grouped_allreduce_grad_async(group)
                self._group_counts[group] = 0
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce and puts the results into p.grad.

        Reductions that have not started (hooks that did not fire for unused parameters, or
        fewer backward passes than backward_passes_per_step) start here with what p.grad
        holds (zeros when None), so that every rank submits the same tensors.
        """
        started = set()
        for key, (handle, _) in self._handles.items():
            if handle is not None:
                started.update(key if isinstance(key, tuple) else (key,))
        # Keyed by id: tuples of tensors must not be compared with ==, which is elementwise.
        late_groups = {}
        for p in self._requires_update - started:
            self._handles.pop(p, None)
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            group = self._p_to_group.get(p)
            if group is None:
                self._handles[p] = self._allreduce_grad_async(p)
            else:
                late_groups[id(group)] = group
        for group in late_groups.values():
            for p in group:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            self._handles[group] = self._grouped_allreduce_grad_async(group)
            self._group_counts[group] = 0

        for key, (handle, ctx) in self._handles.items():
            if isinstance(key, tuple):
                outputs = synchronize(handle)
                for p, output, pctx in zip(key, outputs, ctx):
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    _put_back(p, self._compression.decompress(output, pctx))
                continue
            self._allreduce_delay[key] = self.backward_passes_per_step
            output = synchronize(handle)
            if output.is_sparse:
                key.grad = output
            else:
                _put_back(key, self._compression.decompress(output, ctx))
        self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """Makes step() skip synchronize(), for code that called it already (e.g. to clip
        gradients): optimizer.synchronize(); clip; with optimizer.skip_synchronize(): step()."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super().zero_grad(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        return super().load_state_dict(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` so that step() applies gradients averaged (op) over the ranks of
    process_set. The result is an instance of a new subclass of optimizer's class sharing its
    param_groups; use it in place of the original.

    named_parameters: model.named_parameters(), to name the allreduces (else
        "allreduce.noname.<i>"). compression: Compression.none or Compression.fp16.
    backward_passes_per_step: backward() calls accumulated locally (summed, as in horovod)
        before the gradients are reduced at step().
    gradient_predivide_factor: with op=Average, gradients are divided by this factor before
        the sum and the sum by size/factor after it.
    num_groups / groups: reduce the gradients in that many groups, or in the given lists of
        parameters, each as one grouped allreduce.
    sparse_as_dense: reduce sparse gradients as dense tensors instead of gathering them; the
        result goes back into p.grad as a sparse tensor, so sparse optimizers still work.
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Adasum:
        # Horovod's Adasum optimizer: the ranks combine their local steps' updates, not
        # gradients (compression, groups and sparse_as_dense do not apply there).
        return make_adasum_optimizer(optimizer, named_parameters, process_set)
    if num_groups and groups is not None:
        raise ValueError("pass either num_groups or groups, not both")
    cls = type(optimizer.__class__.__name__, (_DistributedOptimizer, optimizer.__class__), {})
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups if groups is not None else num_groups,
               sparse_as_dense, process_set)
