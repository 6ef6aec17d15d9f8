"""Identity, build flags, and the runtime's lifecycle from Python."""

import json
import os
import threading
import time

import pytest
import torch

import troupe.torch as hvd


def test_identity_matches_launcher():
    assert hvd.is_initialized()
    # troupe-run sets HOROVOD_*, mpirun OMPI_COMM_WORLD_*; neither: one rank.
    env = os.environ
    assert hvd.rank() == int(env.get('HOROVOD_RANK', env.get('OMPI_COMM_WORLD_RANK', '0')))
    assert hvd.size() == int(env.get('HOROVOD_SIZE', env.get('OMPI_COMM_WORLD_SIZE', '1')))
    assert 0 <= hvd.local_rank() < hvd.local_size() <= hvd.size()
    assert 0 <= hvd.cross_rank() < hvd.cross_size()
    assert hvd.is_homogeneous()  # one host: every rank is local


def test_process_set_view_of_the_job():
    ps = hvd.global_process_set
    assert ps.process_set_id == 0
    assert ps.size() == hvd.size() and ps.rank() == hvd.rank() and ps.included()


def test_build_flags():
    assert hvd.gloo_built() and hvd.mpi_built()
    # As configured (tests/python/CMakeLists.txt): NCCL and CUDA where found.
    assert hvd.nccl_built() == int(os.environ['TROUPE_TEST_NCCL_VERSION'])
    assert hvd.cuda_built() == (os.environ['TROUPE_TEST_CUDA_BUILT'] == '1')
    assert not any([hvd.ddl_built(), hvd.ccl_built(), hvd.rocm_built()])
    # troupe-run without --mpi runs Gloo; --mpi, mpirun and a process
    # started alone (as Horovod built with MPI) MPI.
    gloo = 'TROUPE_STORE_ADDR' in os.environ and 'OMPI_COMM_WORLD_SIZE' not in os.environ
    assert hvd.gloo_enabled() == gloo
    assert hvd.mpi_enabled() == (not gloo)
    if hvd.mpi_enabled():
        # MPI_THREAD_SERIALIZED only where asked for (python.mpi_threads_disable).
        disabled = os.environ.get('TROUPE_MPI_THREADS_DISABLE') == '1'
        assert hvd.mpi_threads_supported() == (not disabled)
    else:
        with pytest.raises(ValueError, match='MPI is not enabled'):
            hvd.mpi_threads_supported()


def test_timeline_needs_troupe_timeline():
    assert 'TROUPE_TIMELINE' not in os.environ and 'HOROVOD_TIMELINE' not in os.environ
    with pytest.raises(ValueError, match='TROUPE_TIMELINE'):
        hvd.start_timeline('/tmp/never.json')


def test_timeline_started_and_stopped_at_run_time(tmp_path):
    # The timeline mode is read at init(): restart with DYNAMIC.
    hvd.shutdown()
    os.environ['TROUPE_TIMELINE'] = 'DYNAMIC'
    try:
        hvd.init()
        hvd.start_timeline(tmp_path / 'trace.json', mark_cycles=True)
        hvd.allreduce(torch.ones(3), name='traced')
        hvd.stop_timeline()
        hvd.allreduce(torch.ones(3), name='after_stop')
        trace = (tmp_path / ('trace.%d.json' % hvd.rank())).read_text()
        json.loads(trace)
        assert 'allreduce.traced' in trace and 'after_stop' not in trace
    finally:
        hvd.shutdown()
        del os.environ['TROUPE_TIMELINE']
        hvd.init()


def test_init_twice_is_harmless():
    hvd.init()
    hvd.init()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == hvd.size()


def test_shutdown_and_init_again_and_again():
    for round_ in range(3):
        hvd.shutdown()
        assert not hvd.is_initialized()
        with pytest.raises(ValueError, match='has not been initialized'):
            hvd.rank()
        # As Horovod: no library is enabled without a runtime.
        assert not hvd.mpi_enabled() and not hvd.gloo_enabled()
        with pytest.raises(ValueError, match='MPI is not enabled'):
            hvd.mpi_threads_supported()
        # Horovod's class and words for a collective without a runtime.
        for collective in (lambda: hvd.allreduce(torch.ones(1)),
                           lambda: hvd.allgather_async(torch.ones(1)),
                           lambda: hvd.broadcast_(torch.ones(1), 0), hvd.barrier, hvd.join):
            with pytest.raises(hvd.HorovodInternalError) as failure:
                collective()
            assert str(failure.value) == 'Horovod has not been initialized; use hvd.init().'
            assert not isinstance(failure.value, ValueError)
        hvd.init()
        assert hvd.is_initialized()
        # Unnamed ops are numbered afresh, so every rank still agrees.
        out = hvd.allreduce(torch.full((2,), float(round_)), op=hvd.Sum)
        assert out.tolist() == [float(round_ * hvd.size())] * 2
        assert hvd.broadcast(torch.tensor([hvd.rank()]), 0).item() == 0


def test_synchronize_after_shutdown_raises():
    done = hvd.allreduce_async(torch.ones(1), op=hvd.Sum, name='before.shutdown')
    while not hvd.poll(done):
        time.sleep(0.001)
    # Only rank 0 submits this one: it is pending when the runtime stops.
    pending = hvd.allreduce_async(torch.ones(1), name='never.matched') \
        if hvd.rank() == 0 and hvd.size() > 1 else None
    hvd.shutdown()
    try:
        for handle in (done, pending):
            if handle is None:
                continue
            with pytest.raises(hvd.HorovodInternalError, match='has been shut down'):
                hvd.synchronize(handle)
            # Failed once, the handle is gone, as one synchronized.
            assert hvd.synchronize(handle) is None
    finally:
        hvd.init()


def test_two_threads_synchronize_one_handle():
    # Rank 0's threads both wait on the handle until the others submit:
    # one gets the result, the other None, as a second synchronize() does.
    if hvd.rank() == 0:
        handle = hvd.allreduce_async(torch.ones(2), op=hvd.Sum, name='two.threads')
    else:
        hvd.barrier()
        handle = hvd.allreduce_async(torch.ones(2), op=hvd.Sum, name='two.threads')
    results, errors = [], []

    def wait():
        try:
            results.append(hvd.synchronize(handle))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=wait) for _ in range(2)]
    for t in threads:
        t.start()
    if hvd.rank() == 0:
        time.sleep(0.2)
        hvd.barrier()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(r is None for r in results) == [False, True]
    assert [r for r in results if r is not None][0].tolist() == [hvd.size()] * 2


def test_init_again_with_unregistered_process_sets_raises():
    # A running runtime registers nothing: init() says so instead of
    # leaving the sets unusable.
    with pytest.raises(ValueError, match=r'\[0\] are not registered'):
        hvd.init(process_sets=[hvd.ProcessSet([0])])
    hvd.init(process_sets=[hvd.global_process_set])


def test_unnamed_ops_are_counted_per_process_set(needs_peers):
    # The first size - 1 ranks run an unnamed allreduce on their set, then
    # every rank one on the global set: the names agree only when each set
    # counts its own. (Then init() again with sets, on a runtime with one.)
    sub = hvd.ProcessSet(range(hvd.size() - 1))
    hvd.shutdown()
    try:
        hvd.init(process_sets=[sub])
        if sub.included():
            assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=sub).item() == sub.size()
        handle = hvd.allreduce_async(torch.ones(1), op=hvd.Sum)
        deadline = time.monotonic() + 60
        while not hvd.poll(handle):
            if time.monotonic() > deadline:
                pytest.fail('the unnamed allreduce on the global set never matched up')
            time.sleep(0.01)
        assert hvd.synchronize(handle).item() == hvd.size()
        # init() again with the sets registered, or sets of their ranks, is
        # harmless, as Horovod's; one more set is not.
        hvd.init(process_sets=[sub])
        same = hvd.ProcessSet(list(sub.ranks))
        hvd.init(process_sets=[same])
        assert same.process_set_id == sub.process_set_id == 1
        with pytest.raises(ValueError, match=r'\[%d\] are not registered' % (hvd.size() - 1)):
            hvd.init(process_sets=[sub, hvd.ProcessSet([hvd.size() - 1])])
        if sub.included():
            assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=same).item() == sub.size()
    finally:
        hvd.shutdown()
        hvd.init()


def test_a_set_of_an_earlier_runtime_is_refused(needs_peers):
    # Epochs count from 0 again in a new runtime: the set's id, 1, is free
    # there (or another set's), and must not be used under the old object.
    old = hvd.ProcessSet([0])
    hvd.shutdown()
    try:
        hvd.init(process_sets=[old])
        hvd.shutdown()
        hvd.init(process_sets='dynamic')
        with pytest.raises(ValueError, match=r'\[0\] was registered with a runtime shut'):
            hvd.allreduce(torch.ones(1), process_set=old)
        again = hvd.add_process_set(old)  # registers it anew
        if again.included():
            assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=again).item() == 1
        hvd.remove_process_set(again)
    finally:
        hvd.shutdown()
        os.environ.pop('TROUPE_DYNAMIC_PROCESS_SETS', None)
        hvd.init()


def test_reset_moves_the_job_to_its_next_epoch():
    before = hvd.epoch()
    if hvd.size() > 1 and 'TROUPE_STORE_ADDR' not in os.environ:
        # Under plain mpirun the membership is MPI's.
        with pytest.raises(ValueError, match="rendezvous store"):
            hvd.reset()
        return
    hvd.reset()
    assert hvd.epoch() == before + 1
    assert hvd.rank() == int(os.environ.get('HOROVOD_RANK', '0'))
    x = torch.full((3,), float(hvd.rank() + 1))
    y = hvd.allreduce(x, op=hvd.Sum, name='after.reset')
    assert torch.equal(y, torch.full((3,), float(sum(range(1, hvd.size() + 1)))))
