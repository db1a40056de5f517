"""SyncBatchNorm: batch normalization whose batch statistics span every rank's batch
(horovod.torch.SyncBatchNorm), on CPU and CUDA tensors.

In training, each rank's count, mean and sum of squared deviations per channel are
allgathered and combined into the statistics of the union of the batches (ranks may hold
batches of different sizes); backward allreduces the per-channel sums that the input gradient
needs, so every rank gets what one BatchNorm over the concatenated batch would give it. The
weight and bias gradients stay per rank, like any parameter's, for DistributedOptimizer to
reduce.
"""

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.nn.modules.batchnorm import _BatchNorm

from hoop.torch import basics
from hoop.torch.basics import Sum
from hoop.torch.mpi_ops import allgather_async, allreduce_async, synchronize
from hoop.torch.process_sets import global_process_set

# Fixed names, as horovod's: each call is waited for before the next one starts, so one name
# serves every layer, and ranks agree on it whatever other (unnamed) calls they made.
_STATS_NAME = "sync_batch_norm.stats"
_GRADS_NAME = "sync_batch_norm.grads"


def _compute_dtype(dtype):
    # Half-precision sums over a whole batch lose too much; compute those in float32.
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _per_channel(t, like):
    """A (C,) tensor shaped to broadcast against `like` of shape (N, C, ...)."""
    return t.view([1, -1] + [1] * (like.dim() - 2))


def _reduced_dims(x):
    return [0] + list(range(2, x.dim()))


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, process_set):
        x = input.to(_compute_dtype(input.dtype))
        channels = x.shape[1]
        count = x.numel() // channels if channels else 0
        if count > 0:
            dims = _reduced_dims(x)
            mean = x.mean(dims)
            m2 = (x - _per_channel(mean, x)).square().sum(dims)
        else:
            mean = m2 = x.new_zeros(channels)
        # One row per rank: the count and the per-channel mean and squared deviations, in
        # float64 so that counts stay exact and the combination loses nothing.
        row = torch.cat([torch.tensor([float(count)], dtype=torch.float64, device=x.device),
                         mean.double(), m2.double()]).unsqueeze(0)
        rows = synchronize(allgather_async(row, _STATS_NAME, process_set))
        counts, means, m2s = rows[:, :1], rows[:, 1:channels + 1], rows[:, channels + 1:]
        total = int(counts.sum().item())
        if total <= 1:
            # Every rank sees the same total, so every rank raises: none waits for the others.
            raise ValueError("Expected more than 1 value per channel when training, got "
                             f"{total} over all ranks")
        global_mean = (counts * means).sum(0) / total
        # Chan et al.'s pairwise combination: each rank's squared deviations about its own
        # mean, plus its count times its mean's squared distance from the global mean.
        global_m2 = (m2s + counts * (means - global_mean).square()).sum(0)
        invstd = (global_m2 / total + eps).rsqrt()
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(global_mean.to(running_mean.dtype),
                                                     alpha=momentum)
                unbiased = global_m2 / (total - 1)
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype),
                                                    alpha=momentum)

        mean, invstd = global_mean.to(x.dtype), invstd.to(x.dtype)
        y = (x - _per_channel(mean, x)) * _per_channel(invstd, x)
        if weight is not None:
            y = y * _per_channel(weight.to(x.dtype), x)
        if bias is not None:
            y = y + _per_channel(bias.to(x.dtype), x)
        ctx.save_for_backward(x, weight, mean, invstd)
        ctx.total = total
        ctx.process_set = process_set
        ctx.input_dtype = input.dtype
        ctx.bias_dtype = bias.dtype if bias is not None else None
        return y.to(input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        x, weight, mean, invstd = ctx.saved_tensors
        dy = grad_output.to(x.dtype)
        dims = _reduced_dims(x)
        xmu = x - _per_channel(mean, x)
        sum_dy = dy.sum(dims)
        sum_dy_xmu = (dy * xmu).sum(dims)
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            # The input gradient of normalization depends on the whole batch through
            # sum(dy) and sum(dy * xhat); both, over every rank, in one allreduce.
            both = synchronize(allreduce_async(torch.cat([sum_dy, sum_dy_xmu]), name=_GRADS_NAME,
                                               op=Sum, process_set=ctx.process_set))
            channels = x.shape[1]
            mean_dy = both[:channels] / ctx.total
            mean_dy_xmu = both[channels:] / ctx.total
            scale = invstd if weight is None else invstd * weight.to(x.dtype)
            grad_input = _per_channel(scale, x) * (
                dy - _per_channel(mean_dy, x)
                - xmu * _per_channel(invstd.square() * mean_dy_xmu, x))
            grad_input = grad_input.to(ctx.input_dtype)
        if weight is not None and ctx.needs_input_grad[1]:
            grad_weight = (sum_dy_xmu * invstd).to(weight.dtype)
        if ctx.needs_input_grad[2]:
            grad_bias = sum_dy.to(ctx.bias_dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over the union of every rank's batch (horovod.torch.SyncBatchNorm).

    Input of shape (N, C) or (N, C, ...); N may differ between ranks. In training (and in
    eval without track_running_stats) the mean and variance are those of all ranks' batches
    together, and running_mean / running_var follow the global mean and unbiased variance;
    in eval it normalizes with the running statistics, as torch's BatchNorm. Every rank must
    run each SyncBatchNorm layer's forward and backward in the same order. On a job of one
    rank it is torch's batch norm.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        """A layer over `num_features` channels (C); the arguments are torch's BatchNorm's."""
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        """Normalizes `input` with the global batch statistics (training) or the running ones."""
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                # momentum=None: a cumulative average of the batches' statistics, as torch's.
                factor = 1.0 / float(self.num_batches_tracked)
        if not self.training and self.track_running_stats:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, False, factor, self.eps)
        if basics.size() == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, True, factor, self.eps)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, self.running_mean,
                                            self.running_var, self.eps, factor,
                                            global_process_set)
