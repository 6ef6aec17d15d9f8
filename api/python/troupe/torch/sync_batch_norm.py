"""SyncBatchNorm (horovod/torch/sync_batch_norm.py): batch normalisation
whose statistics cover the whole global batch.

Unlike Horovod's (GPU only), this one runs on CPU tensors. The per-channel
count, sum and sum of squares are combined with one differentiable
allreduce (Sum), so autograd derives the backward pass: the gradient of an
allreduce(Sum) is the allreduce(Sum) of the gradients, which is exactly the
cross-rank term of batch norm's gradient."""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from troupe.common.basics import size
from troupe.torch.mpi_ops import Sum, allreduce


class SyncBatchNorm(_BatchNorm):
    """Drop-in for torch.nn.BatchNorm{1,2,3}d with statistics over all ranks."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError('expected at least 2D input (got {}D input)'.format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked = self.num_batches_tracked + 1
            if self.momentum is None:
                momentum = 1.0 / float(self.num_batches_tracked)
            else:
                momentum = self.momentum
        else:
            momentum = 0.0
        use_batch_stats = self.training or not self.track_running_stats
        if not use_batch_stats or size() == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, use_batch_stats, momentum, self.eps)
        return self._sync_forward(input, momentum)

    def _sync_forward(self, input, momentum):
        channels = input.shape[1]
        reduce_dims = [0] + list(range(2, input.dim()))
        count = torch.tensor([input.numel() // channels], dtype=input.dtype)
        stats = torch.cat([count, input.sum(reduce_dims), (input * input).sum(reduce_dims)])
        stats = allreduce(stats, op=Sum)
        total = stats[0]
        mean = stats[1:1 + channels] / total
        var = stats[1 + channels:] / total - mean * mean
        if self.training and self.track_running_stats:
            with torch.no_grad():
                unbiased = var * (total / (total - 1))
                self.running_mean.mul_(1 - momentum).add_(mean, alpha=momentum)
                self.running_var.mul_(1 - momentum).add_(unbiased, alpha=momentum)
        shape = [1, channels] + [1] * (input.dim() - 2)
        out = (input - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out
