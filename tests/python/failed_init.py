"""A failed init() leaves nothing behind: run on 4 ranks (troupe-run or a
plain mpirun). Each rank gives its own half as a static process set (lists,
not communicators, so the sets must agree and do not): init() raises on
every rank and leaves no runtime; init() works again afterwards; and a
runtime still running at exit (Python's atexit hook removed) is stopped
without crashing. The process used to die with SIGABRT at exit ("free():
invalid pointer" in CAF's multiplexer destructor): the runtime was destroyed
by a static destructor after spdlog's registry, which its actors still used."""
import atexit
import os

import torch

import troupe.torch as hvd
from troupe import _core

rank = int(os.environ.get('TROUPE_RANK') or os.environ['OMPI_COMM_WORLD_RANK'])
try:
    hvd.init(process_sets=[hvd.ProcessSet([rank % 2, rank % 2 + 2])])
    raise AssertionError('init() with mismatching process sets succeeded')
except ValueError as e:
    assert 'mismatching values on different ranks' in str(e), e
assert not hvd.is_initialized()
hvd.init()
assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == hvd.size()
atexit.unregister(_core.shutdown)
print('rank %d: PASS failed init, exiting with the runtime running' % rank, flush=True)
