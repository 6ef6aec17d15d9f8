"""Every collective, dtype and variant (sync, async, in-place, grouped,
non-contiguous) against references computed locally from every rank's input."""

import ctypes
import gc
import os
import time

import pytest
import torch

import troupe.torch as hvd
from conftest import ALL_DTYPES, adasum_reference, all_rank_tensors, rank_tensor

SHAPE = (3, 4)
REDUCE_OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def reference(op, dtype, shape=SHAPE):
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    stacked = torch.stack([t.to(wide) for t in all_rank_tensors(shape, dtype)])
    if op == hvd.Sum:
        out = stacked.sum(0)
    elif op == hvd.Average:
        total = stacked.sum(0)
        out = total / hvd.size() if dtype.is_floating_point else \
            torch.div(total, hvd.size(), rounding_mode='trunc')
    elif op == hvd.Min:
        out = stacked.amin(0)
    elif op == hvd.Max:
        out = stacked.amax(0)
    else:
        out = stacked.prod(0)
    if dtype == torch.bool:
        return out != 0
    return out.to(dtype)


def assert_same(actual, expected):
    """Exact for integers; floating point within the dtype's rounding (an
    average over 3 ranks is not exact)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.is_floating_point:
        tol = 1e-2 if expected.element_size() == 2 else 1e-6
        assert torch.allclose(actual.double(), expected.double(), rtol=tol, atol=tol)
    else:
        assert torch.equal(actual, expected)


def supported(op, dtype):
    return not (dtype == torch.bool and op == hvd.Average)


CASES = [(op, dtype) for op in REDUCE_OPS for dtype in ALL_DTYPES if supported(op, dtype)]


@pytest.mark.parametrize('op,dtype', CASES)
def test_allreduce(op, dtype):
    x = rank_tensor(hvd.rank(), SHAPE, dtype)
    before = x.clone()
    assert_same(hvd.allreduce(x, op=op), reference(op, dtype))
    assert torch.equal(x, before)  # not in place


@pytest.mark.parametrize('dtype', ALL_DTYPES)
def test_allreduce_inplace_and_async(dtype):
    expected = reference(hvd.Sum, dtype)
    x = rank_tensor(hvd.rank(), SHAPE, dtype)
    assert hvd.allreduce_(x, op=hvd.Sum) is x
    assert torch.equal(x, expected)

    x = rank_tensor(hvd.rank(), SHAPE, dtype)
    before = x.clone()
    handle = hvd.allreduce_async(x, op=hvd.Sum, name='async.%s' % dtype)
    assert isinstance(handle, int)
    assert torch.equal(hvd.synchronize(handle), expected)
    assert torch.equal(x, before)

    x = rank_tensor(hvd.rank(), SHAPE, dtype)
    handle = hvd.allreduce_async_(x, op=hvd.Sum)
    while not hvd.poll(handle):
        pass
    assert hvd.synchronize(handle) is x
    assert torch.equal(x, expected)


def test_allreduce_default_op_is_average():
    x = rank_tensor(hvd.rank(), SHAPE, torch.float32)
    assert_same(hvd.allreduce(x), reference(hvd.Average, torch.float32))
    with pytest.warns(DeprecationWarning):
        summed = hvd.allreduce(x, average=False)
    assert torch.equal(summed, reference(hvd.Sum, torch.float32))


def test_allreduce_scale_factors():
    x = rank_tensor(hvd.rank(), SHAPE, torch.float64)
    before = x.clone()
    out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    assert torch.allclose(out, reference(hvd.Sum, torch.float64) * 1.5)
    out = hvd.allreduce(x, op=hvd.Average, prescale_factor=2.0)
    assert torch.allclose(out, reference(hvd.Average, torch.float64) * 2.0)
    # Fused with another tensor, and alone: the prescale never reaches the input.
    outs = hvd.grouped_allreduce([x, x.clone()], op=hvd.Sum, prescale_factor=0.5)
    assert all(torch.allclose(o, reference(hvd.Sum, torch.float64) * 0.5) for o in outs)
    assert torch.equal(x, before)


def test_allreduce_fp16_compression():
    x = rank_tensor(hvd.rank(), SHAPE, torch.float32)
    out = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert out.dtype == torch.float32
    assert torch.equal(out, reference(hvd.Sum, torch.float32))


def test_allreduce_non_contiguous():
    full = rank_tensor(hvd.rank(), (4, 6), torch.float32)
    view = full.t()[::2]  # (3, 4), strided
    assert not view.is_contiguous()
    wide = torch.stack([rank_tensor(r, (4, 6), torch.float32).t()[::2]
                        for r in range(hvd.size())])
    out = hvd.allreduce(view, op=hvd.Sum)
    assert torch.equal(out, wide.sum(0))
    hvd.allreduce_(view, op=hvd.Sum)
    assert torch.equal(view, wide.sum(0))
    assert torch.equal(full.t()[::2], wide.sum(0))  # written through the view


def test_allreduce_adasum():
    x = torch.full((5,), float(hvd.rank() + 1))
    if hvd.size() & (hvd.size() - 1):
        with pytest.raises(ValueError, match='power-of-two'):
            hvd.allreduce(x, op=hvd.Adasum)
        return
    out = hvd.allreduce(x, op=hvd.Adasum)
    expected = adasum_reference([torch.full((5,), float(r + 1)) for r in range(hvd.size())])
    assert torch.allclose(out.double(), expected, rtol=1e-5)


@pytest.mark.parametrize('dtype', [torch.float32, torch.int64, torch.float16])
def test_grouped_allreduce(dtype):
    shapes = [(2,), (3, 2), (1, 1, 4)]
    xs = [rank_tensor(hvd.rank() + 10 * i, s, dtype) for i, s in enumerate(shapes)]
    expected = [torch.stack([rank_tensor(r + 10 * i, s, dtype).to(torch.float64)
                             for r in range(hvd.size())]).sum(0).to(dtype)
                for i, s in enumerate(shapes)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum)
    assert all(torch.equal(o, e) for o, e in zip(outs, expected))
    outs = hvd.synchronize(hvd.grouped_allreduce_async(xs, op=hvd.Sum, name='g.%s' % dtype))
    assert all(torch.equal(o, e) for o, e in zip(outs, expected))
    hvd.synchronize(hvd.grouped_allreduce_async_(xs, op=hvd.Sum))
    assert all(torch.equal(x, e) for x, e in zip(xs, expected))
    xs = [rank_tensor(hvd.rank() + 10 * i, s, dtype) for i, s in enumerate(shapes)]
    assert hvd.grouped_allreduce_(xs, op=hvd.Sum) == xs
    assert all(torch.equal(x, e) for x, e in zip(xs, expected))


@pytest.mark.parametrize('dtype', ALL_DTYPES)
def test_allgather(dtype):
    # First dimensions differ per rank: rank r sends r + 1 rows.
    mine = rank_tensor(hvd.rank(), (hvd.rank() + 1, 3), dtype)
    expected = torch.cat([rank_tensor(r, (r + 1, 3), dtype) for r in range(hvd.size())])
    assert torch.equal(hvd.allgather(mine), expected)
    assert torch.equal(hvd.synchronize(hvd.allgather_async(mine, name='ag.%s' % dtype)),
                       expected)


def test_allgather_non_contiguous_and_empty():
    full = rank_tensor(hvd.rank(), (3, 4), torch.float32)
    expected = torch.cat([rank_tensor(r, (3, 4), torch.float32).t() for r in range(hvd.size())])
    assert torch.equal(hvd.allgather(full.t()), expected)
    empty = torch.zeros((0, 2)) if hvd.rank() == 0 else torch.ones((1, 2))
    assert hvd.allgather(empty).shape == (hvd.size() - 1, 2)


def test_results_allocated_while_python_holds_the_gil():
    # CPU results are the runtime's own memory: poll() keeps the GIL, and
    # the loop below ends while it spins.
    mine = rank_tensor(hvd.rank(), (hvd.rank() + 1, 2), torch.int64)
    square = rank_tensor(hvd.rank(), (hvd.size(), 2), torch.int64)
    handles = [hvd.allgather_async(mine, name='gil.ag'),
               hvd.alltoall_async(torch.cat([mine] * hvd.size()), name='gil.a2a'),
               hvd.reducescatter_async(square, name='gil.rs', op=hvd.Sum)]
    deadline = time.monotonic() + 60
    while not all(hvd.poll(h) for h in handles) and time.monotonic() < deadline:
        pass
    assert all(hvd.poll(h) for h in handles)
    gathered, (exchanged, _), scattered = [hvd.synchronize(h) for h in handles]
    assert torch.equal(gathered, torch.cat([rank_tensor(r, (r + 1, 2), torch.int64)
                                            for r in range(hvd.size())]))
    assert torch.equal(exchanged, torch.cat([rank_tensor(r, (r + 1, 2), torch.int64)
                                             for r in range(hvd.size())]))
    summed = sum(rank_tensor(r, (hvd.size(), 2), torch.int64) for r in range(hvd.size()))
    assert torch.equal(scattered, summed[hvd.rank():hvd.rank() + 1])


def test_results_arrive_while_one_rank_never_lets_go_of_the_gil(needs_peers, tmp_path):
    # Rank 0 holds its GIL in one C call (read() on a FIFO through
    # ctypes.PyDLL, which keeps the GIL) until rank 1 has seen their
    # allgather complete or gave up after 20 s, and writes which. A backend
    # that needed rank 0's GIL to allocate the result could not take part.
    fifo = hvd.broadcast_object(str(tmp_path / 'gil.fifo'), root_rank=0, name='gil.fifo')
    if hvd.rank() == 0:
        os.mkfifo(fifo)
    hvd.barrier()
    mine = rank_tensor(hvd.rank(), (hvd.rank() + 1, 3), torch.float32)
    expected = torch.cat([rank_tensor(r, (r + 1, 3), torch.float32) for r in range(hvd.size())])
    fd = os.open(fifo, os.O_RDWR) if hvd.rank() <= 1 else None
    h = hvd.allgather_async(mine, name='gil.held')
    if hvd.rank() == 0:
        said = ctypes.create_string_buffer(1)
        assert ctypes.PyDLL(None).read(fd, said, 1) == 1
        assert said.raw == b'1', 'rank 1 saw no result while rank 0 held its GIL'
    elif hvd.rank() == 1:
        done = False
        try:  # whatever happens here, rank 0 must get its byte
            deadline = time.monotonic() + 20
            while not hvd.poll(h) and time.monotonic() < deadline:
                time.sleep(0.001)
            done = hvd.poll(h)
        finally:
            os.write(fd, b'1' if done else b'0')
        assert done, 'no result in 20 s while rank 0 held its GIL'
    if fd is not None:
        os.close(fd)
    assert torch.equal(hvd.synchronize(h), expected)


def test_cpu_results_are_aligned_writable_and_outlive_their_handles():
    x = rank_tensor(hvd.rank(), (2, 3), torch.float64)
    gathered = hvd.allgather(x, name='own.ag')
    n = hvd.size()
    scattered = hvd.reducescatter(rank_tensor(hvd.rank(), (1, 2), torch.int32), op=hvd.Sum,
                                  name='own.rs')
    gc.collect()
    expected = torch.cat([rank_tensor(r, (2, 3), torch.float64) for r in range(n)])
    assert gathered.data_ptr() % 64 == 0
    gathered += 1
    assert torch.equal(gathered, expected + 1)
    # One row over n ranks: rank 0 gets it, the others an empty result.
    assert scattered.shape == ((1, 2) if hvd.rank() == 0 else (0, 2))
    assert scattered.dtype == torch.int32


def test_large_cpu_results_are_whole_and_writable():
    # A result of 32 MiB or more comes in huge-page-aligned memory of its
    # own (madvise'd for 2 MiB pages); every element still lands, and it
    # outlives a second one of the same size.
    n = hvd.size()
    rows = (32 << 20) // (4 * 1024 * n) + 1
    x = torch.arange(rows * 1024, dtype=torch.float32).view(rows, 1024) + hvd.rank()
    first = hvd.allgather(x, name='large.ag')
    second = hvd.allgather(x, name='large.ag')
    assert first.numel() * 4 >= 32 << 20
    assert first.data_ptr() % 64 == 0
    expected = torch.cat([x - hvd.rank() + r for r in range(n)])
    assert torch.equal(first, expected) and torch.equal(second, expected)
    first.mul_(2)
    assert torch.equal(second, expected)
    del first
    gc.collect()
    assert torch.equal(second, expected)


def test_large_new_outputs_are_whole_and_their_own():
    # allreduce, grouped_allreduce and broadcast into new tensors of 32 MiB
    # or more (the runtime's memory in huge pages): right, contiguous,
    # apart from the input, and the input left as it was.
    n = hvd.size()
    x = torch.arange((32 << 20) // 8 + 3, dtype=torch.float64) + hvd.rank()
    before = x.clone()
    summed = hvd.allreduce(x, op=hvd.Sum, name='large.ar')
    grouped = hvd.grouped_allreduce([x], op=hvd.Sum, name='large.gar')[0]
    root = n - 1
    sent = hvd.broadcast(x, root, name='large.bc')
    want = (torch.arange(x.numel(), dtype=torch.float64) * n + sum(range(n)))
    assert torch.equal(summed, want) and torch.equal(grouped, want)
    assert torch.equal(sent, before - hvd.rank() + root)
    assert torch.equal(x, before)
    for t in (summed, grouped, sent):
        assert t.is_contiguous() and t.data_ptr() != x.data_ptr()
    assert not summed.requires_grad


def test_grouped_allgather():
    xs = [rank_tensor(hvd.rank(), (hvd.rank() + 1,), torch.int32),
          rank_tensor(hvd.rank() + 5, (1, 2), torch.float64)]
    outs = hvd.grouped_allgather(xs)
    assert torch.equal(outs[0], torch.cat([rank_tensor(r, (r + 1,), torch.int32)
                                           for r in range(hvd.size())]))
    assert torch.equal(outs[1], torch.cat([rank_tensor(r + 5, (1, 2), torch.float64)
                                           for r in range(hvd.size())]))
    outs = hvd.synchronize(hvd.grouped_allgather_async(xs))
    assert outs[0].shape == (sum(range(1, hvd.size() + 1)),)


@pytest.mark.parametrize('dtype', ALL_DTYPES)
def test_broadcast(dtype):
    root = hvd.size() - 1
    expected = rank_tensor(root, SHAPE, dtype)
    x = rank_tensor(hvd.rank(), SHAPE, dtype)
    before = x.clone()
    assert torch.equal(hvd.broadcast(x, root), expected)
    assert torch.equal(x, before)
    assert torch.equal(hvd.synchronize(hvd.broadcast_async(x, root)), expected)
    assert hvd.broadcast_(x, root) is x and torch.equal(x, expected)
    x = rank_tensor(hvd.rank(), SHAPE, dtype)
    assert hvd.synchronize(hvd.broadcast_async_(x, root, name='b.%s' % dtype)) is x
    assert torch.equal(x, expected)


def test_broadcast_non_contiguous_inplace():
    full = rank_tensor(hvd.rank(), (4, 4), torch.float32)
    hvd.broadcast_(full[:, 1], 0)
    assert torch.equal(full[:, 1], rank_tensor(0, (4, 4), torch.float32)[:, 1])


@pytest.mark.parametrize('dtype', ALL_DTYPES)
def test_alltoall_equal_splits(dtype):
    n = hvd.size()
    # Rank r sends rows [2 * d, 2 * d + 2) of its tensor to rank d.
    x = rank_tensor(hvd.rank(), (2 * n, 3), dtype)
    expected = torch.cat([rank_tensor(r, (2 * n, 3), dtype)[2 * hvd.rank():2 * hvd.rank() + 2]
                          for r in range(n)])
    out = hvd.alltoall(x)
    assert isinstance(out, torch.Tensor) and torch.equal(out, expected)
    out, received = hvd.synchronize(hvd.alltoall_async(x))
    assert torch.equal(out, expected)
    assert received.dtype == torch.int32 and received.tolist() == [2] * n


def splits_of(r, n):
    # Rank r sends (r + d) % 3 rows to rank d.
    return [(r + d) % 3 for d in range(n)]


def test_alltoall_uneven_splits():
    n, me = hvd.size(), hvd.rank()
    x = rank_tensor(me, (sum(splits_of(me, n)), 2), torch.float32)
    out, received = hvd.alltoall(x, splits=splits_of(me, n))
    expected = []
    for r in range(n):
        s = splits_of(r, n)
        expected.append(rank_tensor(r, (sum(s), 2), torch.float32)[sum(s[:me]):sum(s[:me + 1])])
    assert torch.equal(out, torch.cat(expected))
    assert received.tolist() == [splits_of(r, n)[me] for r in range(n)]
    out2, _ = hvd.alltoall(x, splits=torch.tensor(splits_of(me, n), dtype=torch.int32))
    assert torch.equal(out2, out)


def rows_of(rank, total, n):
    """Horovod's reducescatter split: the first total % n ranks get one more."""
    q, extra = divmod(total, n)
    start = rank * q + min(rank, extra)
    return start, q + (1 if rank < extra else 0)


@pytest.mark.parametrize('dtype', [d for d in ALL_DTYPES if d != torch.bool])
@pytest.mark.parametrize('op', [hvd.Sum, hvd.Average])
def test_reducescatter(dtype, op):
    rows = 2 * hvd.size() + 1  # uneven on purpose
    x = rank_tensor(hvd.rank(), (rows, 2), dtype)
    start, count = rows_of(hvd.rank(), rows, hvd.size())
    expected = reference(op, dtype, (rows, 2))[start:start + count]
    assert_same(hvd.reducescatter(x, op=op), expected)
    assert_same(hvd.synchronize(hvd.reducescatter_async(x, op=op)), expected)


def test_reducescatter_default_average_and_scaling():
    rows = hvd.size() * 2
    x = rank_tensor(hvd.rank(), (rows,), torch.float64)
    start, count = rows_of(hvd.rank(), rows, hvd.size())
    expected = reference(hvd.Average, torch.float64, (rows,))[start:start + count]
    assert torch.allclose(hvd.reducescatter(x), expected)
    assert torch.allclose(hvd.reducescatter(x, prescale_factor=2.0, postscale_factor=0.25),
                          expected * 0.5)


def test_grouped_reducescatter():
    n = hvd.size()
    xs = [rank_tensor(hvd.rank(), (n, 2), torch.float32),
          rank_tensor(hvd.rank() + 7, (2 * n + 1,), torch.int32)]
    outs = hvd.grouped_reducescatter(xs, op=hvd.Sum)
    for i, (shape, dtype, shift) in enumerate([((n, 2), torch.float32, 0),
                                               ((2 * n + 1,), torch.int32, 7)]):
        total = torch.stack([rank_tensor(r + shift, shape, dtype).to(torch.float64)
                             for r in range(n)]).sum(0).to(dtype)
        start, count = rows_of(hvd.rank(), shape[0], n)
        assert torch.equal(outs[i], total[start:start + count])
    outs2 = hvd.synchronize(hvd.grouped_reducescatter_async(xs, op=hvd.Sum))
    assert all(torch.equal(a, b) for a, b in zip(outs, outs2))


def test_grouped_reducescatter_fuses_small_large_and_empty_members():
    # One float32 group: small ones fused, a large one (>= 32 KiB) alone,
    # members without rows or columns, each result its own shape; then a
    # group of empty members only.
    n = hvd.size()
    shapes = [(2 * n + 1, 3), (0, 3), (n * 4096 + 1, 2), (1, 5), (4, 0), (n,)]
    xs = [rank_tensor(hvd.rank() + k, shape, torch.float32) for k, shape in enumerate(shapes)]
    outs = hvd.grouped_reducescatter(xs, op=hvd.Sum, prescale_factor=2.0)
    for k, shape in enumerate(shapes):
        total = torch.stack([rank_tensor(r + k, shape, torch.float32).to(torch.float64)
                             for r in range(n)]).sum(0) * 2
        start, count = rows_of(hvd.rank(), shape[0], n)
        assert outs[k].shape == (count,) + shape[1:], (k, outs[k].shape)
        assert torch.allclose(outs[k].to(torch.float64), total[start:start + count]), k
    empty = hvd.grouped_reducescatter([torch.zeros(0, 3), torch.zeros(0, 2)], op=hvd.Sum)
    assert [tuple(t.shape) for t in empty] == [(0, 3), (0, 2)]


def test_empty_groups_give_empty_lists():
    # (e.g. the gradients of a model none of whose parameters has one yet)
    assert hvd.grouped_allreduce([]) == []
    assert hvd.grouped_allgather([]) == []
    assert hvd.grouped_reducescatter([]) == []
    assert hvd.synchronize(hvd.grouped_allreduce_async_([])) == []


def test_barrier_and_join():
    hvd.barrier()
    hvd.barrier(process_set=hvd.global_process_set)
    # Every rank joins; the last to join is some rank of the job.
    assert 0 <= hvd.join() < hvd.size()


def test_join_with_uneven_work():
    # Rank 0 does one allreduce more than the others; joined ranks add zeros.
    if hvd.rank() == 0:
        out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name='only_rank0')
        assert torch.equal(out, torch.ones(3))
    assert hvd.join() in range(hvd.size())


def test_unnamed_ops_match_across_ranks():
    # Many unnamed ops in flight at once: names come from per-type counters.
    handles = [hvd.allreduce_async(torch.full((2,), float(i)), op=hvd.Sum) for i in range(20)]
    handles += [hvd.allgather_async(torch.full((1,), float(i))) for i in range(5)]
    outs = [hvd.synchronize(h) for h in handles]
    for i in range(20):
        assert torch.equal(outs[i], torch.full((2,), float(i * hvd.size())))
    for i in range(5):
        assert torch.equal(outs[20 + i], torch.full((hvd.size(),), float(i)))


def test_synchronize_unknown_handle():
    handle = hvd.allreduce_async(torch.ones(1))
    hvd.synchronize(handle)
    assert hvd.synchronize(handle) is None
    with pytest.raises(ValueError, match='was not created or has been cleared'):
        hvd.poll(handle)


def test_scalar_allreduce_and_broadcast():
    x = torch.tensor(float(hvd.rank()))
    assert hvd.allreduce(x, op=hvd.Sum).item() == sum(range(hvd.size()))
    assert hvd.broadcast(x, 0).item() == 0.0
