"""A child os.fork()ed after init() (a bare fork; multiprocessing's children
leave with os._exit and skip exit handlers): the runtime's threads stay in
the parent, so every call that needs them fails at once, saying so, and the
child exits without waiting for them or finalizing the parent's MPI."""

import atexit
import ctypes
import os
import time
import traceback

import torch

import troupe.torch as hvd
from troupe.common.exceptions import HorovodInternalError

CHILD_DEADLINE_S = 60


def _raises_fork_error(call, runtime_pid):
    try:
        call()
    except HorovodInternalError as e:
        assert 'copy of pid %d' % runtime_pid in str(e), str(e)
        return
    raise AssertionError('%s did not fail in a forked child' % call)


def _raises(error, call):
    try:
        call()
    except error:
        return
    raise AssertionError('%s did not raise %s' % (call, error.__name__))


def _wait_for_child(pid):
    deadline = time.monotonic() + CHILD_DEADLINE_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError('the forked child did not finish within %d s' % CHILD_DEADLINE_S)


def _child_checks(rank, size, pending):
    runtime_pid = os.getppid()
    assert hvd.is_initialized()
    assert (hvd.rank(), hvd.size()) == (rank, size)
    _raises_fork_error(lambda: hvd.allreduce(torch.ones(1), name='fork.child'), runtime_pid)
    hvd.init()  # harmless when initialized: the runtime is the parent's
    _raises_fork_error(lambda: hvd.allgather(torch.ones(1), name='fork.child'), runtime_pid)
    if pending is not None:
        _raises_fork_error(lambda: hvd.synchronize(pending), runtime_pid)
    # A grandchild: the same identity, the errors name the runtime's pid.
    grandchild = os.fork()
    if grandchild == 0:
        ok = hvd.rank() == rank and hvd.size() == size
        try:
            _raises_fork_error(lambda: hvd.broadcast(torch.ones(1), 0, name='fork.grandchild'),
                               runtime_pid)
        except BaseException:
            traceback.print_exc()
            ok = False
        os._exit(0 if ok else 1)
    _wait_for_child(grandchild)
    # After the child's own shutdown nothing answers, and init() says why.
    hvd.shutdown()
    assert not hvd.is_initialized()
    _raises(ValueError, hvd.rank)
    _raises_fork_error(lambda: hvd.init(), runtime_pid)


def _fork_and_check(pending):
    rank, size = hvd.rank(), hvd.size()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _child_checks(rank, size, pending)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            # A normal exit, not pytest's: Python's exit handlers (troupe's
            # shutdown), then C's (the runtime's and MPI's).
            atexit._run_exitfuncs()
            ctypes.CDLL(None).exit(code)
    _wait_for_child(pid)


def test_a_child_forked_after_init_fails_at_once_and_exits():
    _fork_and_check(None)
    assert hvd.allreduce(torch.ones(1), name='fork.after', op=hvd.Sum).item() == hvd.size()


def test_an_operation_pending_at_the_fork_finishes_only_in_the_parent(needs_peers):
    # Rank 0's allreduce waits for the others, who submit it only after
    # rank 0's 'go': it is still running when rank 0 forks.
    if hvd.rank() == 0:
        pending = hvd.allreduce_async(torch.ones(2), name='fork.pending', op=hvd.Sum)
        _fork_and_check(pending)
        hvd.broadcast(torch.zeros(1), 0, name='fork.go')
        assert hvd.synchronize(pending).tolist() == [hvd.size()] * 2
    else:
        _fork_and_check(None)
        hvd.broadcast(torch.zeros(1), 0, name='fork.go')
        assert hvd.allreduce(torch.ones(2), name='fork.pending',
                             op=hvd.Sum).tolist() == [hvd.size()] * 2
