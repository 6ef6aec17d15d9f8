"""hvd.shutdown() from a thread other than the one that called hvd.init()
and ran collectives (which stays alive, waiting for it): it returns, and the
runtime starts again afterwards. It hung for good: CAF keeps the logger of
the actor system a thread last spawned in, and the system's destructor
waited for the main thread's reference."""

import os
import threading

import torch

import troupe.torch as hvd

DEADLINE_S = 60


def main():
    hvd.init()
    total = hvd.allreduce(torch.ones(2), op=hvd.Sum, name='before')
    assert total.tolist() == [hvd.size()] * 2, total
    stopper = threading.Thread(target=hvd.shutdown)
    stopper.start()
    stopper.join(DEADLINE_S)
    if stopper.is_alive():
        print('FAIL: shutdown() on another thread did not return within %d s' % DEADLINE_S,
              flush=True)
        os._exit(1)
    assert not hvd.is_initialized()
    hvd.init()
    total = hvd.allreduce(torch.ones(2), op=hvd.Sum, name='after')
    assert total.tolist() == [hvd.size()] * 2, total
    print('rank %d: PASS shutdown from another thread' % hvd.rank(), flush=True)
    hvd.shutdown()


if __name__ == '__main__':
    main()
