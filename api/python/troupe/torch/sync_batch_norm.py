"""SyncBatchNorm (horovod/torch/sync_batch_norm.py): batch normalisation
whose statistics cover the whole global batch.

Unlike Horovod's (GPU only), this one runs on CPU tensors. Each rank's
per-channel count, mean and sum of squared deviations reach every rank in
one differentiable allreduce (Sum) and are combined exactly, so autograd
derives the backward pass: the gradient of an allreduce(Sum) is the
allreduce(Sum) of the gradients, which is exactly the cross-rank term of
batch norm's gradient."""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from troupe.common.basics import rank, size
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
        shape = [1, channels] + [1] * (input.dim() - 2)
        # In float32 at least, and each rank's statistics centred on its own
        # mean, then combined exactly (Chan et al.): a sum of squares minus a
        # squared mean loses every digit when the mean dwarfs the spread,
        # and a float16 count overflows past 65,504 elements.
        acc = torch.float64 if input.dtype == torch.float64 else torch.float32
        x = input.to(acc)
        count = input.numel() // channels
        if count:
            local_mean = x.mean(reduce_dims)
            local_m2 = ((x - local_mean.view(shape)) ** 2).sum(reduce_dims)
        else:  # an empty batch here: it weighs nothing
            local_mean = local_m2 = x.new_zeros(channels)
        row = torch.cat([x.new_tensor([float(count)]), local_mean, local_m2]).unsqueeze(0)
        # Every rank's row by an allreduce(Sum) of rows that are zero but
        # for one's own: unlike allgather's (Horovod's average), its
        # gradient sums every rank's gradient of this rank's row.
        width = row.shape[1]
        rows = allreduce(torch.cat([row.new_zeros(rank(), width), row,
                                    row.new_zeros(size() - rank() - 1, width)]), op=Sum)
        counts = rows[:, :1]
        total = counts.sum()
        means = rows[:, 1:1 + channels]
        mean = (counts * means).sum(0) / total
        var = (rows[:, 1 + channels:].sum(0) + (counts * (means - mean) ** 2).sum(0)) / total
        if self.training and self.track_running_stats:
            with torch.no_grad():
                unbiased = var * (total / (total - 1))
                self.running_mean.mul_(1 - momentum).add_(
                    mean.to(self.running_mean.dtype), alpha=momentum)
                self.running_var.mul_(1 - momentum).add_(
                    unbiased.to(self.running_var.dtype), alpha=momentum)
        out = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.to(acc).view(shape) + self.bias.to(acc).view(shape)
        return out.to(input.dtype)
