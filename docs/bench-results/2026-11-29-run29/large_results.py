"""2 ranks: hvd.reducescatter of a 64 / 128 MiB float32 tensor, hvd.allgather
of one half as large per rank (a result of 64 / 128 MiB), and the in-place
allreduce_ of the first for reference; 3 rounds of 6 calls each,
alternating; rank 0 prints the medians.
troupe-run -np 2 /usr/bin/python3 large_results.py"""
import statistics, sys, time, torch
import troupe.torch as hvd
hvd.init()
n = hvd.size()
for mb in (64, 128):
    t = torch.ones(mb * 262144)
    g = torch.ones(mb * 262144 // n)
    res = {}
    for rnd in range(3):
        for name, fn in (('reducescatter', lambda: hvd.reducescatter(t, op=hvd.Sum, name='r%d' % mb)),
                         ('allgather', lambda: hvd.allgather(g, name='g%d' % mb)),
                         ('allreduce_', lambda: hvd.allreduce_(t, op=hvd.Sum, name='a%d' % mb))):
            for i in range(6):
                s = time.perf_counter(); fn(); res.setdefault(name, []).append(time.perf_counter() - s)
    if hvd.rank() == 0:
        print('%4d MiB in: ' % mb + '  '.join('%s %.1f ms' % (k, statistics.median(v) * 1e3) for k, v in res.items()), flush=True)
hvd.shutdown()
