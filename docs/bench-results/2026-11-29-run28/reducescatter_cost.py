"""2 ranks: hvd.reducescatter of one float32 tensor against the in-place
allreduce_ of the same tensor, alternating, 3 rounds; rank 0 prints the
medians. troupe-run -np 2 /usr/bin/python3 reducescatter_cost.py 1,16,64"""
import statistics
import sys
import time

import torch
import troupe.torch as hvd

hvd.init()
for mb in [int(x) for x in sys.argv[1].split(',')]:
    t = torch.ones(mb * 262144)
    calls = (('allreduce_', lambda: hvd.allreduce_(t, op=hvd.Sum, name='a%d' % mb)),
             ('reducescatter', lambda: hvd.reducescatter(t, op=hvd.Sum, name='r%d' % mb)))
    res = {}
    for rnd in range(3):
        for name, fn in calls:
            for i in range(max(3, 40 // mb)):
                t.fill_(1.0)
                s = time.perf_counter()
                fn()
                res.setdefault(name, []).append(time.perf_counter() - s)
    if hvd.rank() == 0:
        m = {k: statistics.median(v) * 1e6 for k, v in res.items()}
        print('%4d MiB  allreduce_ %.0f us  reducescatter %.0f us' % (mb, m['allreduce_'], m['reducescatter']), flush=True)
hvd.shutdown()
