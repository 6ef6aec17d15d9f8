# Rank 0's median µs per call of one collective at 8 B ... 64 MiB, 2 ranks:
#   PYTHONPATH=build/python build/bin/troupe-run -np 2 --shm 0 \
#     /usr/bin/python3 op_sizes.py allreduce|allgather|alltoall
import statistics
import sys
import time

import torch
import troupe.torch as hvd

op = sys.argv[1]
hvd.init()
call = {
    "allreduce": lambda x, n: hvd.allreduce_(x, name=n),
    "allgather": lambda x, n: hvd.allgather(x, name=n),
    "alltoall": lambda x, n: hvd.alltoall(x, name=n),
}[op]


def med(f, n):
    for _ in range(5):
        f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


out = []
for b in [8, 4096, 65536, 1 << 20, 16 << 20, 64 << 20]:
    x = torch.ones(b // 4)
    out.append(f"{b}: {med(lambda: call(x, f'{op}{b}'), 200 if b < (1 << 20) else 20):.1f}")
if hvd.rank() == 0:
    print(op, " | ".join(out))
