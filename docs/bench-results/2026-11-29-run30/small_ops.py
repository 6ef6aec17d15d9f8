import time, statistics, sys
import torch
import troupe.torch as hvd
hvd.init()
x = torch.ones(1)
def med(f, n=400):
    for _ in range(50): f()
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6
r = {}
r['allreduce 4B'] = med(lambda: hvd.allreduce_(x, name='a'))
r['allgather 4B'] = med(lambda: hvd.allgather(x, name='g'))
r['broadcast 4B'] = med(lambda: hvd.broadcast_(x, 0, name='b'))
r['alltoall 8B'] = med(lambda: hvd.alltoall(torch.ones(hvd.size()), name='t'))
r['barrier'] = med(lambda: hvd.barrier())
if hvd.rank() == 0:
    print(' | '.join(f'{k} {v:.1f}' for k, v in r.items()))
