"""ElasticSampler (horovod.torch.elastic.sampler)."""

import math

import torch

from troupe.common.basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Shards a dataset over the current ranks and remembers how much of the
    epoch was processed, so that after a reset the remaining indices are
    re-sharded over the new membership: within an epoch no index is
    processed twice or skipped (padding to a multiple of the size aside).
    Unlike Horovod's, it re-shards on every reset, also when the reset
    skipped the state sync (a removal)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch` from its first index."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Every rank processed `batch_size` more samples."""
        self.processed_num += batch_size * self.num_replicas

    def record_indices(self, indices):
        """This rank processed `indices` (the others as many each)."""
        self.processed_num += len(indices) * self.num_replicas

    def load_state_dict(self, state_dict):
        self.epoch = state_dict['epoch']
        self.processed_num = state_dict['processed_num']
        self.reset()

    def state_dict(self):
        return dict(epoch=self.epoch, processed_num=self.processed_num)

    def reset(self):
        """Re-shards what is left of the epoch over the current ranks."""
        self.num_replicas = size()
        self.rank = rank()
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = torch.randperm(len(self.dataset), generator=g).tolist()
        else:
            indices = list(range(len(self.dataset)))
        self.remaining_indices = indices[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        indices += indices[:(self.total_size - len(indices))]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
