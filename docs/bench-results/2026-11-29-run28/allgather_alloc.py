import time, statistics, torch, sys
import troupe.torch as hvd
from troupe.torch import handles
hvd.init()
t = torch.ones(2)
def run(label):
    for _ in range(50): hvd.allgather(t, name='g'); hvd.broadcast_(t, 0, name='b')
    res = {}
    for rnd in range(3):
        for name, fn in (('allgather', lambda: hvd.allgather(t, name='g')), ('broadcast_', lambda: hvd.broadcast_(t, 0, name='b'))):
            for _ in range(300):
                s = time.perf_counter(); fn(); res.setdefault(name, []).append(time.perf_counter() - s)
    if hvd.rank() == 0:
        print(label, {k: round(statistics.median(v) * 1e6, 1) for k, v in res.items()}, flush=True)
run('plain')
cached = {}
def fast_call(self, shape):
    key = (tuple(shape), self.dtype)
    if key not in cached: cached[key] = torch.empty(shape, dtype=self.dtype)
    self.tensor = cached[key]
    return self.tensor.data_ptr()
handles._Output.__call__ = fast_call
run('no torch.empty')
def noop_call(self, shape):
    return fast_call(self, shape)
hvd.shutdown()
