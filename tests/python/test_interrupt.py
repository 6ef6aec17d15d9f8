"""Ctrl-C during a wait raises KeyboardInterrupt at once; the collective
goes on, and its handle can be waited for again."""

import os
import signal
import threading

import torch

import troupe.torch as hvd


def test_ctrl_c_interrupts_a_wait(needs_peers):
    # Rank 0 waits for an allreduce the others submit only after rank 0's
    # 'go' broadcast: only Ctrl-C can end that wait (it used to be seen only
    # once the collective completed, here never).
    if hvd.rank() == 0:
        handle = hvd.allreduce_async(torch.ones(2), name='late', op=hvd.Sum)
        ctrl_c = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        ctrl_c.start()
        try:
            hvd.synchronize(handle)
            raise AssertionError('synchronize() returned before the others submitted')
        except KeyboardInterrupt:
            pass
        finally:
            ctrl_c.join()
        assert not hvd.poll(handle)
        hvd.broadcast(torch.zeros(1), 0, name='go')
        assert hvd.synchronize(handle).tolist() == [hvd.size()] * 2
    else:
        hvd.broadcast(torch.zeros(1), 0, name='go')
        assert hvd.allreduce(torch.ones(2), name='late', op=hvd.Sum).tolist() == [hvd.size()] * 2
    # The runtime goes on.
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == hvd.size()



def test_ctrl_c_in_a_barrier_does_not_block_in_the_dropped_handle(needs_peers):
    # Ctrl-C in barrier() drops its handle while the barrier still waits
    # for the others: the caller goes on at once (the handle's destructor
    # used to wait for the collective, which here only completes after
    # rank 0's 'go2': a deadlock no Ctrl-C could end).
    from troupe import _core
    if hvd.rank() == 0:
        ctrl_c = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
        ctrl_c.start()
        try:
            hvd.barrier()
            raise AssertionError('barrier() returned before the others entered it')
        except KeyboardInterrupt:
            pass
        finally:
            ctrl_c.join()
        assert _core._orphaned_operations() == 1
        hvd.broadcast(torch.zeros(1), 0, name='go2')
    else:
        hvd.broadcast(torch.zeros(1), 0, name='go2')
        hvd.barrier()
    # Lists run in order on every rank: once 'after2' is done, the barrier
    # is too, and what its dropped handle held is released.
    assert hvd.allreduce(torch.ones(1), name='after2', op=hvd.Sum).item() == hvd.size()
    assert _core._orphaned_operations() == 0
