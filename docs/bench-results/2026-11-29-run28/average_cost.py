import sys, time, statistics, torch
import troupe.torch as hvd
hvd.init()
sizes = [int(x) for x in sys.argv[1].split(',')]
for mb in sizes:
    n = mb * 262144 // 1 if mb > 0 else 1
    t = torch.ones(n)
    res = {}
    for rnd in range(3):
        for name, op in (('sum', hvd.Sum), ('avg', hvd.Average)):
            steps = max(3, 40 // max(1, mb))
            for i in range(steps):
                t.fill_(1.0)
                s = time.perf_counter()
                hvd.allreduce_(t, op=op, name='t%d' % mb)
                res.setdefault(name, []).append(time.perf_counter() - s)
    if hvd.rank() == 0:
        m = {k: statistics.median(v) * 1e6 for k, v in res.items()}
        print('%4d MiB  sum %.0f us  avg %.0f us  avg/sum %.2f' % (mb, m['sum'], m['avg'], m['avg'] / m['sum']), flush=True)
hvd.shutdown()
