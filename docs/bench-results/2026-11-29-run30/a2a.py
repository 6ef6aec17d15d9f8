import time, statistics, sys
import torch
import troupe.torch as hvd
hvd.init()
def med(f, n):
    for _ in range(5): f()
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6
out = []
for b in [8, 4096, 65536, 1 << 20, 16 << 20, 64 << 20]:
    x = torch.ones(b // 4)
    out.append(f'{b}: {med(lambda: hvd.alltoall(x, name="t%d" % b), 200 if b < (1<<20) else 20):.1f}')
if hvd.rank() == 0: print(' | '.join(out))
