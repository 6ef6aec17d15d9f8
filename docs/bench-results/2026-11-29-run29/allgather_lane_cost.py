"""2 ranks: a step of N float32 allgathers of E elements each
(allgather_async each, then synchronize each), 3 rounds of 40 steps after
a warm-up step; rank 0 prints the median per step. Run with the fast lane
on (default) and off (--fast-lane 0) to compare.
troupe-run -np 2 /usr/bin/python3 allgather_lane_cost.py 64x256,64x4096"""
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
        hs = [hvd.allgather_async(t, name='ag%s.%d' % (spec, i)) for i, t in enumerate(ts)]
        for h in hs:
            hvd.synchronize(h)

    each()
    res = []
    for rnd in range(3):
        for i in range(40):
            s = time.perf_counter()
            each()
            res.append(time.perf_counter() - s)
    if hvd.rank() == 0:
        print('%-10s allgather each %.0f us' % (spec, statistics.median(res) * 1e6), flush=True)
hvd.shutdown()
