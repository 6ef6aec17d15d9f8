import json, statistics, sys, time, torch
import troupe.torch as hvd
hvd.init()
torch.set_num_threads(1)
rows = {}
cases = [('broadcast 4 B', torch.ones(1), 300), ('broadcast 1 MiB', torch.ones(1 << 18), 60),
         ('broadcast 16 MiB', torch.ones(1 << 22), 10), ('barrier', None, 300)]
for r in range(3):
    for name, t, iters in cases:
        hvd.barrier()
        for i in range(iters):
            s = time.perf_counter()
            if t is None:
                hvd.barrier()
            else:
                hvd.broadcast_(t, i % hvd.size(), name=name)
            rows.setdefault(name, []).append(time.perf_counter() - s)
if hvd.rank() == 0:
    out = {k: statistics.median(v) for k, v in rows.items()}
    for k, v in out.items():
        print('%-18s %9.1f us' % (k, v * 1e6))
    json.dump(out, open(sys.argv[1], 'w'))
