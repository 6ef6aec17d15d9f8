"""A small elastic training job for the launcher's elastic tests: a linear
model on a fixed synthetic dataset, TorchState with an ElasticSampler,
commit every --commit-every steps. Prints one JSON line per step:
{"event": "step", "epoch", "batch", "rank", "size", "worker", "membership",
"checksum", "indices"}; "checksum" is the parameters' sum after the step, so
ranks of one membership epoch must agree on it."""

import argparse
import faulthandler
import json
import os
import signal
import sys
import time

import torch

import troupe.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument('--dataset-size', type=int, default=240)
parser.add_argument('--batch-size', type=int, default=2)
parser.add_argument('--epochs', type=int, default=1)
parser.add_argument('--commit-every', type=int, default=2)
parser.add_argument('--step-sleep', type=float, default=0.05)
parser.add_argument('--process-set', action='store_true',
                    help='allreduce over a process set of every rank but the last each step, '
                         're-registered after every reset; add "pset" (its sum on members) '
                         'and, at a reset, "stale" (what using the old set raised) to the lines')
parser.add_argument('--leave-at-batch', type=int, default=-1,
                    help='worker 2 exits 0 (a graceful leave) after this many batches')
parser.add_argument('--fail-at-batch', type=int, default=-1,
                    help='every worker exits 3 (a failure) after this many batches')
parser.add_argument('--count-resources', action='store_true',
                    help='add open fds and threads ("fds", "threads") to reset lines (takes '
                         '0.1 s per reset)')
args = parser.parse_args()
# A hung worker's stacks: kill -USR1 <pid>.
faulthandler.register(signal.SIGUSR1)

hvd.init(process_sets='dynamic' if args.process_set else None)


def all_but_last():
    return hvd.add_process_set(list(range(hvd.size() - 1)))


subset = all_but_last() if args.process_set else None
torch.manual_seed(0)
dataset = torch.arange(args.dataset_size, dtype=torch.float32).unsqueeze(1)
model = torch.nn.Linear(1, 1)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-5),
                                     named_parameters=model.named_parameters())
sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=7)
worker = int(os.environ['TROUPE_WORKER_ID'])


def emit(**fields):
    print(json.dumps(fields), flush=True)


@hvd.elastic.run
def train(state):
    for state.epoch in range(state.epoch, args.epochs):
        indices = list(iter(state.sampler))
        for pos in range(0, len(indices), args.batch_size):
            batch = indices[pos:pos + args.batch_size]
            optimizer.zero_grad()
            loss = model(dataset[batch]).pow(2).mean()
            loss.backward()
            optimizer.step()
            state.sampler.record_indices(batch)
            state.batch += 1
            checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
            extra = {}
            if subset is not None and subset.included():
                extra['pset'] = float(hvd.allreduce(torch.ones(1), op=hvd.Sum,
                                                    process_set=subset))
            emit(event='step', epoch=state.epoch, batch=state.batch, rank=hvd.rank(),
                 size=hvd.size(), worker=worker, membership=hvd.epoch(), checksum=checksum,
                 indices=batch, pid=os.getpid(), time=time.time(), **extra)
            time.sleep(args.step_sleep)
            if worker == 2 and state.batch == args.leave_at_batch:
                sys.exit(0)
            if state.batch == args.fail_at_batch:
                sys.exit(3)
            if state.batch % args.commit_every == 0:
                state.commit()
        state.batch = 0
        state.sampler.set_epoch(state.epoch + 1)
        state.commit()


def resources():
    """Open fds and threads; the least of a few samples 20 ms apart, since a
    thread of the previous epoch may still be ending (a leak stays)."""
    def sample():
        with open('/proc/self/status') as status:
            threads = next(int(line.split()[1]) for line in status
                           if line.startswith('Threads:'))
        return len(os.listdir('/proc/self/fd')), threads
    samples = []
    for _ in range(5):
        samples.append(sample())
        time.sleep(0.02)
    return dict(fds=min(f for f, _ in samples), threads=min(t for _, t in samples))


def on_reset():
    global subset
    extra = {}
    if subset is not None:
        try:
            hvd.allreduce(torch.ones(1), process_set=subset)
            extra['stale'] = 'no error'
        except ValueError as e:
            extra['stale'] = str(e)
        subset = all_but_last()
    emit(event='reset', rank=hvd.rank(), size=hvd.size(), worker=worker,
         membership=hvd.epoch(), env_rank=int(os.environ['RANK']),
         env_size=int(os.environ['WORLD_SIZE']), time=time.time(), **extra,
         **(resources() if args.count_resources else {}))


state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)
state.register_reset_callbacks([on_reset])
train(state)
emit(event='done', rank=hvd.rank(), size=hvd.size(), worker=worker,
     spawned_on=os.environ.get('SPAWNED_ON'))
