"""2 ranks, rank 0 prints the medians per step (3 rounds of 40 steps,
calls alternating) of a step of N float32 tensors of E elements each.
  fused_cost.py reducescatter 64x256,64x4096
    reducescatter_async each then synchronize each (Horovod's pattern), one
    grouped_reducescatter, and the same tensors' allreduce_async_ for
    reference.
  fused_cost.py allgather 64x256,64x4096
    allgather_async each then synchronize each; run with --fast-lane 1 and
    --fast-lane 0 to compare.
troupe-run -np 2 /usr/bin/python3 fused_cost.py MODE SPECS"""
import statistics
import sys
import time

import torch
import troupe.torch as hvd


def each(start, ts, prefix):
    hs = [start(t, '%s.%d' % (prefix, i)) for i, t in enumerate(ts)]
    for h in hs:
        hvd.synchronize(h)


def calls_of(mode, spec, ts):
    if mode == 'allgather':
        return (('allgather each',
                 lambda: each(lambda t, n: hvd.allgather_async(t, name=n), ts, 'ag' + spec)),)

    def allreduce():
        each(lambda t, n: hvd.allreduce_async_(t, op=hvd.Sum, name=n), ts, 'ar' + spec)
        for t in ts:
            t.fill_(1.0)

    return (('reducescatter each',
             lambda: each(lambda t, n: hvd.reducescatter_async(t, op=hvd.Sum, name=n), ts,
                          'rs' + spec)),
            ('grouped_reducescatter',
             lambda: hvd.grouped_reducescatter(ts, op=hvd.Sum, name='g' + spec)),
            ('allreduce_ each', allreduce))


hvd.init()
mode = sys.argv[1]
for spec in sys.argv[2].split(','):
    n, e = (int(x) for x in spec.split('x'))
    calls = calls_of(mode, spec, [torch.ones(e) for _ in range(n)])
    for _, fn in calls:
        fn()
    res = {}
    for rnd in range(3):
        for name, fn in calls:
            for i in range(40):
                s = time.perf_counter()
                fn()
                res.setdefault(name, []).append(time.perf_counter() - s)
    if hvd.rank() == 0:
        print('%-10s ' % spec + '  '.join('%s %.0f us' % (k, statistics.median(v) * 1e6)
                                          for k, v in res.items()), flush=True)
hvd.shutdown()
