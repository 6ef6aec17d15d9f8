"""A rank that resets right after a collective does not fail that
collective on the ranks still finishing it: run on 3 ranks, each step a
broadcast and then reset() on every rank, with a busy process beside them
(rank 0 starts it; it stops itself after 60 s and is killed when the steps
end) so that the ranks drift apart.
A reset's goodbye used to fail a peer's collective at once when it overtook
the coordinator's response list there (9 of 300 steps failed on rank 0)."""
import subprocess
import sys

import torch

import troupe.torch as hvd

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
hvd.init()
busy = None
if hvd.rank() == 0:
    # The spinning process itself, not a wrapper whose child would outlive
    # a kill.
    busy = subprocess.Popen([sys.executable, '-c', 'import time\n'
                             'end = time.monotonic() + 60\n'
                             'while time.monotonic() < end:\n'
                             '    pass\n'])
failed = []
try:
    first = hvd.epoch()
    for step in range(steps):
        try:
            value = hvd.broadcast(torch.tensor([hvd.rank() + 7]), 0).item()
            if value != 7:
                failed.append('step %d: broadcast gave %d, not 7' % (step, value))
        except hvd.HorovodInternalError as e:
            failed.append('step %d: %s' % (step, e))
        hvd.reset()
    if hvd.epoch() != first + steps:
        failed.append('epoch %d after %d resets from %d' % (hvd.epoch(), steps, first))
finally:
    if busy:
        busy.kill()
        busy.wait()
for line in failed:
    print('rank %d: FAIL %s' % (hvd.rank(), line), flush=True)
print('rank %d: %s %d broadcasts, each followed by reset()'
      % (hvd.rank(), 'FAIL' if failed else 'PASS', steps), flush=True)
sys.exit(1 if failed else 0)
