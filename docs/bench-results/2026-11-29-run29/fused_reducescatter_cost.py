"""2 ranks: a step of N float32 reducescatters of E elements each, the way
a sharded optimizer submits them (reducescatter_async each, then
synchronize each, Horovod's pattern), and as one grouped_reducescatter;
the same tensors' allreduce_async_ step for reference. Alternating, 3
rounds of 40 steps; rank 0 prints the medians per step.
troupe-run -np 2 /usr/bin/python3 fused_reducescatter_cost.py 64x256,64x4096"""
import statistics
import sys
import time

import torch
import troupe.torch as hvd

hvd.init()
for spec in sys.argv[1].split(','):
    n, e = (int(x) for x in spec.split('x'))
    ts = [torch.ones(e) for _ in range(n)]

    def each():
        hs = [hvd.reducescatter_async(t, op=hvd.Sum, name='rs%s.%d' % (spec, i))
              for i, t in enumerate(ts)]
        for h in hs:
            hvd.synchronize(h)

    def grouped():
        hvd.grouped_reducescatter(ts, op=hvd.Sum, name='g' + spec)

    def allreduce():
        hs = [hvd.allreduce_async_(t, op=hvd.Sum, name='ar%s.%d' % (spec, i))
              for i, t in enumerate(ts)]
        for h in hs:
            hvd.synchronize(h)
        for t in ts:
            t.fill_(1.0)

    calls = (('reducescatter each', each), ('grouped_reducescatter', grouped),
             ('allreduce_ each', allreduce))
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
