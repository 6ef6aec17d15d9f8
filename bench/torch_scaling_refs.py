"""References for examples/pytorch/synthetic_benchmark.py's scaling on this
host: the same model, batch and timing (rank 0's img/sec times the ranks),
with the gradients handled otherwise:

  --sync none  every rank trains on its own and waits for nobody: what the
               host gives two trainings side by side
  --sync step  every rank trains on its own and waits for the others once
               per step (a 4-byte allreduce): the lockstep of every
               data-parallel step, which costs the slower rank's time
  --sync ddp   torch.distributed's DistributedDataParallel over gloo (the
               peer), no Troupe collective

Run under troupe-run like the benchmark (--sync ddp also needs MASTER_ADDR
and MASTER_PORT); prints its "Total img/sec" line. bench/torch_scaling.sh
runs all three.
"""

import argparse
import os
import timeit

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models

import troupe.torch as hvd

parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
parser.add_argument('--model', type=str, default='resnet18')
parser.add_argument('--batch-size', type=int, default=16)
parser.add_argument('--num-warmup-batches', type=int, default=10)
parser.add_argument('--num-batches-per-iter', type=int, default=10)
parser.add_argument('--num-iters', type=int, default=10)
parser.add_argument('--sync', choices=['none', 'step', 'ddp'], required=True)
args, _ = parser.parse_known_args()  # (the benchmark's other flags do not apply)

hvd.init()
model = getattr(models, args.model)()
if args.sync == 'ddp':
    dist.init_process_group('gloo', init_method='env://', rank=hvd.rank(),
                            world_size=hvd.size())
    model = torch.nn.parallel.DistributedDataParallel(model)
optimizer = optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(args.batch_size, 3, 224, 224)
target = torch.LongTensor(args.batch_size).random_() % 1000
token = torch.zeros(1)


def benchmark_step():
    optimizer.zero_grad()
    loss = F.cross_entropy(model(data), target)
    loss.backward()
    optimizer.step()
    if args.sync == 'step':
        hvd.allreduce_(token, name='step')


hvd.allreduce_(token, name='start')  # every rank starts together
timeit.timeit(benchmark_step, number=args.num_warmup_batches)
img_secs = [args.batch_size * args.num_batches_per_iter /
            timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
            for _ in range(args.num_iters)]
if hvd.rank() == 0:
    mean, conf = np.mean(img_secs), 1.96 * np.std(img_secs)
    print('Sync %s: Img/sec per CPU: %.1f +-%.1f' % (args.sync, mean, conf))
    print('Total img/sec on %d CPU(s): %.1f +-%.1f' %
          (hvd.size(), hvd.size() * mean, hvd.size() * conf))
if args.sync == 'ddp':
    dist.destroy_process_group()
