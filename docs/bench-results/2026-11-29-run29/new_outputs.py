"""2 ranks: hvd.allreduce (into a new tensor) and hvd.allreduce_ (in place) of
16 / 64 MiB float32, and torch.empty_like + fill_ of the same size, 3 rounds
of 6 calls each, alternating; rank 0 prints the medians.
troupe-run -np 2 /usr/bin/python3 new_outputs.py"""
import statistics, time, torch
import troupe.torch as hvd
hvd.init()
for mb in (16, 64):
    t = torch.ones(mb * 262144)
    res = {}
    for rnd in range(3):
        for name, fn in (('allreduce', lambda: hvd.allreduce(t, op=hvd.Sum, name='o%d' % mb)),
                         ('allreduce_', lambda: hvd.allreduce_(t, op=hvd.Sum, name='i%d' % mb)),
                         ('empty_like+fill', lambda: torch.empty_like(t).fill_(1))):
            for i in range(6):
                s = time.perf_counter(); fn(); res.setdefault(name, []).append(time.perf_counter() - s)
    if hvd.rank() == 0:
        print('%4d MiB: ' % mb + '  '.join('%s %.1f ms' % (k, statistics.median(v) * 1e3) for k, v in res.items()), flush=True)
hvd.shutdown()
