"""Horovod's documented elastic PyTorch example (docs/elastic.rst), runnable
on Troupe with only the import changed. Synthetic data, CPU.

    troupe-run -np 2 --min-np 1 --max-np 4 \\
        --host-discovery-script ./discover_hosts.sh \\
        python3 examples/pytorch/elastic_train.py

(see docs/elastic.md for a discovery script)."""

import argparse

import torch
import torch.nn.functional as F
import torch.optim as optim

import troupe.torch as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--batches-per-epoch', type=int, default=20)
parser.add_argument('--batches-per-commit', type=int, default=2)
parser.add_argument('--batch-size', type=int, default=16)
parser.add_argument('--lr', type=float, default=0.01)
args = parser.parse_args()

hvd.init()

if torch.cuda.is_available():
    torch.cuda.set_device(hvd.local_rank())

torch.manual_seed(42)
model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4),
                            torch.nn.LogSoftmax(dim=1))
lr = args.lr
epochs = args.epochs
batches_per_epoch = args.batches_per_epoch
batches_per_commit = args.batches_per_commit

optimizer = optim.SGD(model.parameters(), lr * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


def get_random_batch():
    data = torch.randn(args.batch_size, 20)
    target = (data[:, 0] > 0).long() + 2 * (data[:, 1] > 0).long()
    return data, target


@hvd.elastic.run
def train(state):
    batch_offset = state.batch
    for state.epoch in range(state.epoch, epochs):
        for state.batch in range(state.batch, batches_per_epoch):
            data, target = get_random_batch()

            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()

            if state.batch % batches_per_commit == 0:
                state.commit()
        state.batch = 0
        if hvd.rank() == 0:
            print('epoch %d done on %d rank(s), loss %.4f' % (state.epoch, hvd.size(), loss.item()),
                  flush=True)


def on_state_reset():
    # adjust learning rate on reset
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr * hvd.size()


state = hvd.elastic.TorchState(model, optimizer, batch=0, epoch=0)
state.register_reset_callbacks([on_state_reset])
train(state)
