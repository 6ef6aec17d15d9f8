"""End-to-end data-parallel training on generated data, written as a Horovod
script (only the import names Troupe): four Gaussian clusters in 16
dimensions, an MLP with SyncBatchNorm, DistributedSampler shards,
DistributedOptimizer, and metrics averaged over the ranks.

    troupe-run -np 2 /usr/bin/python3 examples/pytorch/train_synthetic.py

Rank 0 prints the test accuracy after each epoch and exits 1 if the final
one is below --target-accuracy (default 95 %).
"""

import argparse

import torch
import torch.nn.functional as F
import torch.utils.data.distributed

import troupe.torch as hvd

parser = argparse.ArgumentParser(description='Troupe PyTorch training on synthetic data')
parser.add_argument('--epochs', type=int, default=5)
parser.add_argument('--batch-size', type=int, default=32, help='per rank')
parser.add_argument('--lr', type=float, default=0.05, help='per rank; scaled by size()')
parser.add_argument('--samples', type=int, default=4096)
parser.add_argument('--target-accuracy', type=float, default=0.95)
parser.add_argument('--seed', type=int, default=42)
args = parser.parse_args()

hvd.init()
torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_dataset(n, seed):
    """Four classes: Gaussian clusters around fixed random centres."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(4, 16, generator=torch.Generator().manual_seed(0)) * 2
    labels = torch.randint(0, 4, (n,), generator=g)
    points = centres[labels] + torch.randn(n, 16, generator=g) * 2.5
    return torch.utils.data.TensorDataset(points, labels)


train_set = make_dataset(args.samples, seed=1)
test_set = make_dataset(args.samples // 4, seed=2)
# Horovod: each rank reads its own shard.
train_sampler = torch.utils.data.distributed.DistributedSampler(
    train_set, num_replicas=hvd.size(), rank=hvd.rank())
test_sampler = torch.utils.data.distributed.DistributedSampler(
    test_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False)
train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                           sampler=train_sampler)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=256, sampler=test_sampler)

model = torch.nn.Sequential(
    torch.nn.Linear(16, 64), hvd.SyncBatchNorm(64), torch.nn.ReLU(),
    torch.nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def train(epoch):
    model.train()
    train_sampler.set_epoch(epoch)
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
    return metric_average(loss.item(), 'train_loss')


def test():
    model.eval()
    correct = 0
    total = 0
    with torch.no_grad():
        for data, target in test_loader:
            correct += (model(data).argmax(1) == target).sum().item()
            total += target.numel()
    return metric_average(correct / total, 'test_accuracy')


accuracy = 0.0
for epoch in range(args.epochs):
    loss = train(epoch)
    accuracy = test()
    if hvd.rank() == 0:
        print('Epoch %d: train loss %.4f, test accuracy %.2f%%' % (epoch, loss, 100 * accuracy))

if hvd.rank() == 0:
    print('Final test accuracy: %.2f%% (target %.0f%%) on %d ranks' %
          (100 * accuracy, 100 * args.target_accuracy, hvd.size()))
if accuracy < args.target_accuracy:
    raise SystemExit(1)
