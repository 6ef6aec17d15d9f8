"""Horovod's split: ValueError for arguments rejected before anything is
sent, HorovodInternalError (a RuntimeError) when the collective fails."""

import pytest
import torch

import troupe.torch as hvd


def test_exception_classes():
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    assert issubclass(hvd.HostsUpdatedInterrupt, RuntimeError)
    assert hvd.HostsUpdatedInterrupt(True).skip_sync is True


def test_mismatched_shapes_fail_on_every_rank(needs_peers):
    x = torch.ones(hvd.rank() + 2)
    with pytest.raises(hvd.HorovodInternalError,
                       match=r'Mismatched tensor shapes .*rank 0 sent \[2\], rank 1 sent \[3\]'):
        hvd.allreduce(x, name='mismatch')
    # The runtime is still usable afterwards.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [hvd.size()] * 2


def test_mismatched_dtypes_fail_on_every_rank(needs_peers):
    x = torch.ones(2, dtype=torch.float32 if hvd.rank() == 0 else torch.float64)
    with pytest.raises(hvd.HorovodInternalError, match='Mismatched data types'):
        hvd.allreduce(x, name='mismatch.dtype')


def test_mismatched_reduce_ops_fail_on_every_rank(needs_peers):
    op = hvd.Sum if hvd.rank() == 0 else hvd.Max
    with pytest.raises(hvd.HorovodInternalError, match='Mismatched'):
        hvd.allreduce(torch.ones(2), name='mismatch.op', op=op)


def test_unsupported_tensors():
    with pytest.raises(ValueError, match='Tensor type torch.ComplexFloatTensor is not '
                                         'supported'):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match='dense'):
        hvd.allreduce_(torch.ones(2, 2).to_sparse())
    with pytest.raises(ValueError, match='torch.Tensor'):
        hvd.allgather_async([1, 2])


def test_bad_arguments():
    x = torch.ones(4 * hvd.size(), 2)
    with pytest.raises(ValueError, match='root rank'):
        hvd.broadcast(x, hvd.size())
    with pytest.raises(ValueError, match='supersedes average'):
        hvd.allreduce(x, average=True, op=hvd.Sum)
    with pytest.raises(ValueError, match='only supports AVERAGE and SUM'):
        hvd.reducescatter(x, op=hvd.Max)
    with pytest.raises(ValueError, match='scalar'):
        hvd.reducescatter(torch.tensor(1.0))
    with pytest.raises(ValueError, match='scalar'):
        hvd.allgather(torch.tensor(1.0))
    with pytest.raises(ValueError, match='bool supports'):
        hvd.allreduce(torch.ones(2, dtype=torch.bool), op=hvd.Sum, prescale_factor=2.0)
    with pytest.raises(ValueError, match='Adasum supports floating-point'):
        hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum)


def test_averaging_bool_names_the_op():
    # Average is the default op: the error says it was the one asked for
    # (Horovod refuses bool in every reduction).
    flags = torch.ones(2 * hvd.size(), dtype=torch.bool)
    for reduction in (lambda: hvd.allreduce(flags), lambda: hvd.allreduce_(flags),
                      lambda: hvd.allreduce(flags, average=True),
                      lambda: hvd.grouped_allreduce([torch.ones(1), flags]),
                      lambda: hvd.reducescatter(flags),
                      lambda: hvd.grouped_reducescatter([flags])):
        with pytest.raises(ValueError, match=r'op=Average, the default op.*op=hvd.Sum'):
            reduction()
    assert hvd.allreduce(flags, op=hvd.Min).all()


def test_alltoall_bad_splits():
    x = torch.ones(hvd.size() + 1, 2)
    if hvd.size() > 1:
        with pytest.raises(ValueError, match='not an even multiple'):
            hvd.alltoall(x)
    with pytest.raises(ValueError, match='does not equal number of workers'):
        hvd.alltoall(x, splits=[1] * (hvd.size() + 1))
    with pytest.raises(ValueError, match='greater than the first dimension'):
        hvd.alltoall(x, splits=[hvd.size() + 2] * hvd.size())
    with pytest.raises(ValueError, match='1D splits'):
        hvd.alltoall(x, splits=torch.ones(1, hvd.size(), dtype=torch.int32))
    with pytest.raises(ValueError, match='32-bit integer'):
        hvd.alltoall(x, splits=torch.ones(hvd.size(), dtype=torch.int64))


# Every async collective with a second call under its name, as (start,
# check of the first's result).
def _async_collectives():
    n = hvd.size()
    return {
        'allreduce_async': (lambda: hvd.allreduce_async(torch.ones(2), name='dup', op=hvd.Sum),
                            lambda out: out.tolist() == [n, n]),
        'allreduce_async_': (lambda: hvd.allreduce_async_(torch.ones(2), name='dup_', op=hvd.Sum),
                             lambda out: out.tolist() == [n, n]),
        'grouped_allreduce_async': (
            lambda: hvd.grouped_allreduce_async([torch.ones(1)], name='gdup', op=hvd.Sum),
            lambda out: out[0].item() == n),
        'allgather_async': (lambda: hvd.allgather_async(torch.ones(1), name='dup'),
                            lambda out: out.tolist() == [1.0] * n),
        'grouped_allgather_async': (
            lambda: hvd.grouped_allgather_async([torch.ones(1)], name='gdup'),
            lambda out: out[0].tolist() == [1.0] * n),
        'broadcast_async': (lambda: hvd.broadcast_async(torch.full((1,), hvd.rank()), 0,
                                                        name='dup'),
                            lambda out: out.item() == 0),
        'broadcast_async_': (lambda: hvd.broadcast_async_(torch.full((1,), hvd.rank()), 0,
                                                          name='dup_'),
                             lambda out: out.item() == 0),
        'alltoall_async': (lambda: hvd.alltoall_async(torch.ones(n), name='dup'),
                           lambda out: out[0].tolist() == [1.0] * n),
        'reducescatter_async': (lambda: hvd.reducescatter_async(torch.ones(n), name='dup',
                                                                op=hvd.Sum),
                                lambda out: out.tolist() == [n]),
        'grouped_reducescatter_async': (
            lambda: hvd.grouped_reducescatter_async([torch.ones(n)], name='gdup', op=hvd.Sum),
            lambda out: out[0].tolist() == [n]),
    }


@pytest.mark.parametrize('collective', [
    'allreduce_async', 'allreduce_async_', 'grouped_allreduce_async', 'allgather_async',
    'grouped_allgather_async', 'broadcast_async', 'broadcast_async_', 'alltoall_async',
    'reducescatter_async', 'grouped_reducescatter_async'])
def test_duplicate_pending_name_raises_at_the_call(needs_peers, collective):
    # Rank 0 submits the name twice while the others wait at a barrier, so
    # the first is surely still pending: the second call raises, as
    # horovod.torch's enqueue does, and the first completes.
    start, check = _async_collectives()[collective]  # all of them, by name
    if hvd.rank() == 0:
        first = start()
        with pytest.raises(ValueError, match='same name as another tensor'):
            start()
        hvd.barrier()
    else:
        hvd.barrier()
        first = start()
    assert check(hvd.synchronize(first))
    # Once finished, the name is free again.
    assert check(hvd.synchronize(start()))


def test_reducescatter_with_adasum_is_an_internal_error():
    # Horovod raises its RuntimeError here; other unsupported ops stay
    # ValueError (test_bad_arguments).
    x = torch.ones(2 * hvd.size())
    with pytest.raises(hvd.HorovodInternalError, match='only supports AVERAGE and SUM'):
        hvd.reducescatter(x, op=hvd.Adasum)
    with pytest.raises(hvd.HorovodInternalError, match='only supports AVERAGE and SUM'):
        hvd.grouped_reducescatter_async([x], op=hvd.Adasum)


def test_process_set_errors_without_dynamic_mode():
    # The 4-rank process-set scripts (process_sets_example.py) cover the rest.
    with pytest.raises(ValueError, match='TROUPE_DYNAMIC_PROCESS_SETS=1'):
        hvd.add_process_set([0])
    with pytest.raises(ValueError, match='has not been registered'):
        hvd.allreduce(torch.ones(1), process_set=hvd.ProcessSet([0]))
    with pytest.raises(ValueError, match='mpi4py communicator'):
        hvd.init(comm=[0])