"""Per-call cost of a 4-byte allreduce from Python, next to the same call
made straight on the core module (the binding's floor). Compare the medians
with the C++ API's 4-byte row of bench/allreduce_bench on the same backend:

    troupe-run -np 2 /usr/bin/python3 bench/torch_allreduce_overhead.py
    troupe-run --gloo -np 2 build/bin/allreduce_bench --json ar.json

Rank 0 prints a markdown table (median / p90 in microseconds) and one JSON
line per row. Variants alternate within each round so noise hits all alike.
"""

import argparse
import json
import time

import torch

import troupe.torch as hvd
from troupe import _core

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument('--iters', type=int, default=2000, help='calls per variant and round')
parser.add_argument('--rounds', type=int, default=5)
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)
tensor = torch.ones(1, dtype=torch.float32)
out = torch.empty_like(tensor)


def core_allreduce():
    # What every troupe.torch allreduce ends in: one core call and a wait.
    h = _core.allreduce(tensor.data_ptr(), out.data_ptr(), 7, [1], 'core', hvd.Sum, 1.0, 1.0,
                        None)
    h.wait()


variants = {
    'core (_core.allreduce + wait)': core_allreduce,
    'hvd.allreduce_ (in place)': lambda: hvd.allreduce_(tensor, name='inplace', op=hvd.Sum),
    'hvd.allreduce (new tensor)': lambda: hvd.allreduce(tensor, name='out',
                                                                  op=hvd.Sum),
    'hvd.allreduce unnamed': lambda: hvd.allreduce(tensor, op=hvd.Sum),
}
samples = {name: [] for name in variants}
for name, fn in variants.items():  # warm-up
    for _ in range(100):
        fn()
for r in range(args.rounds):
    order = list(variants.items())
    order = order[r % len(order):] + order[:r % len(order)]
    for name, fn in order:
        hvd.barrier()
        for _ in range(args.iters):
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)

if hvd.rank() == 0:
    print('ranks: %d, backend: %s' % (hvd.size(), 'mpi' if hvd.mpi_enabled() else
                                      'gloo' if hvd.gloo_enabled() else 'local'))
    print('| call | median us | p90 us |')
    print('|---|---|---|')
    rows = []
    for name, values in samples.items():
        values.sort()
        median = values[len(values) // 2] * 1e6
        p90 = values[int(0.9 * (len(values) - 1))] * 1e6
        rows.append({'call': name, 'ranks': hvd.size(), 'median_us': round(median, 1),
                     'p90_us': round(p90, 1)})
        print('| %s | %.1f | %.1f |' % (name, median, p90))
    for row in rows:
        print(json.dumps(row))
hvd.shutdown()
