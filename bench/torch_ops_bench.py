"""Per-call cost of small and 1 MiB broadcasts, allgathers, allreduces (sum,
and average), reduce-scatters and alltoalls from Python: troupe.torch (Horovod's calls) or torch.distributed (gloo), the
same tensors and loop. Run by bench/torch_ops.sh, which alternates the two
in one session and prints the table:

    troupe-run -np 2 /usr/bin/python3 bench/torch_ops_bench.py --impl troupe --json F
    MASTER_ADDR=127.0.0.1 MASTER_PORT=P troupe-run -np 2 /usr/bin/python3 \\
        bench/torch_ops_bench.py --impl torch --json F

Rank 0 writes F: {"impl", "ranks", "rows": {"<op> <bytes>": median seconds}}.
The small size is 8 bytes (two float32), so that an alltoall of 2 ranks
sends each one element (and a reduce-scatter leaves each one).
Every call is timed alone (blocking, as a training script's metric
averaging, parameter broadcast or gather is); the ops alternate within each
round so noise hits all alike.
"""
import argparse
import json
import statistics
import time

import torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument('--impl', choices=('troupe', 'torch'), required=True)
parser.add_argument('--json', required=True)
parser.add_argument('--rounds', type=int, default=3)
parser.add_argument('--iters', type=int, default=300, help='calls of the small size per op and round')
args = parser.parse_args()
torch.set_num_threads(1)

if args.impl == 'troupe':
    import troupe.torch as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()

    def ops(t, outs, tag):
        return {
            'broadcast': lambda: hvd.broadcast_(t, 0, name='b' + tag),
            'allgather': lambda: hvd.allgather(t, name='g' + tag),
            'allreduce': lambda: hvd.allreduce_(t, name='a' + tag, op=hvd.Sum),
            'average': lambda: hvd.allreduce_(t, name='m' + tag, op=hvd.Average),
            'reducescatter': lambda: hvd.reducescatter(t, name='r' + tag, op=hvd.Sum),
            'alltoall': lambda: hvd.alltoall(t, name='x' + tag),
        }

    barrier = hvd.barrier
else:
    import torch.distributed as dist
    dist.init_process_group('gloo')
    rank, size = dist.get_rank(), dist.get_world_size()

    def ops(t, outs, tag):
        return {
            'broadcast': lambda: dist.broadcast(t, 0),
            'allgather': lambda: dist.all_gather(outs, t),
            'allreduce': lambda: dist.all_reduce(t),
            # torch.distributed has no average for gloo: DDP divides after.
            'average': lambda: (dist.all_reduce(t), t.div_(size)),
            # Nor a reduce-scatter: the whole sum, then this rank's part.
            'reducescatter': lambda: (dist.all_reduce(t), t.chunk(size)[rank].clone()),
            'alltoall': lambda: dist.all_to_all_single(torch.empty_like(t), t),
        }

    barrier = dist.barrier

samples = {}
# An alltoall splits the first dimension evenly: 8 bytes, two floats, so
# that each of 2 ranks sends one; 1 MiB as the others.
for nbytes in (8, 1 << 20):
    n = nbytes // 4
    t = torch.ones(n)
    outs = [torch.empty(n) for _ in range(size)]
    calls = ops(t, outs, str(n))
    iters = args.iters if nbytes <= 1024 else max(1, args.iters // 5)
    for fn in calls.values():  # warm-up: names cached, buffers touched
        for _ in range(20):
            fn()
    for r in range(args.rounds):
        names = list(calls)
        names = names[r % len(names):] + names[:r % len(names)]
        for op in names:
            fn = calls[op]
            barrier()
            xs = samples.setdefault('%s %d' % (op, nbytes), [])
            for _ in range(iters):
                start = time.perf_counter()
                fn()
                xs.append(time.perf_counter() - start)

if rank == 0:
    with open(args.json, 'w') as f:
        json.dump({'impl': args.impl, 'ranks': size,
                   'rows': {k: statistics.median(v) for k, v in samples.items()}}, f)
if args.impl == 'troupe':
    hvd.shutdown()
else:
    dist.destroy_process_group()
