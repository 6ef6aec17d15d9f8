"""Gradients of the differentiable collectives against Horovod's definitions,
computed locally from every rank's upstream gradient."""

import pytest
import torch

import troupe.torch as hvd
from conftest import rank_tensor


def weights(r, shape):
    """Rank r's upstream gradient dL/dy (loss = sum(y * w_r))."""
    return rank_tensor(100 + r, shape, torch.float64)


def all_weights(shape):
    return [weights(r, shape) for r in range(hvd.size())]


def leaf(shape, seed_shift=0):
    return rank_tensor(hvd.rank() + seed_shift, shape, torch.float64).requires_grad_()


@pytest.mark.parametrize('op,pre,post', [(hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0),
                                         (hvd.Sum, 0.5, 3.0)])
def test_allreduce_grad(op, pre, post):
    x = leaf((3, 2))
    y = hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post)
    (y * weights(hvd.rank(), y.shape)).sum().backward()
    expected = torch.stack(all_weights((3, 2))).sum(0) * pre * post
    if op == hvd.Average:
        expected /= hvd.size()
    assert torch.allclose(x.grad, expected)


def test_grouped_allreduce_grad():
    xs = [leaf((2,)), leaf((1, 3), 1)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum)
    sum(((y * weights(hvd.rank() + 7 * i, y.shape)).sum() for i, y in enumerate(ys))).backward()
    for i, x in enumerate(xs):
        expected = torch.stack([weights(r + 7 * i, x.shape) for r in range(hvd.size())]).sum(0)
        assert torch.allclose(x.grad, expected)


def gathered_rows(r):
    return r + 1  # rank r contributes r + 1 rows


def test_grouped_allreduce_without_grad_builds_no_autograd_node():
    xs = [rank_tensor(hvd.rank(), shape, torch.float64) for shape in [(2,), (3,)]]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum)
    assert all(y.grad_fn is None and not y.requires_grad for y in ys)
    for x, y in zip(xs, ys):
        expected = torch.stack([rank_tensor(r, x.shape, torch.float64)
                                for r in range(hvd.size())]).sum(0)
        assert torch.allclose(y, expected)
    # With a gradient wanted, the node is there.
    with_grad = hvd.grouped_allreduce([leaf((2,))], op=hvd.Sum)
    assert with_grad[0].grad_fn is not None


def test_allgather_grad():
    me, n = hvd.rank(), hvd.size()
    x = leaf((gathered_rows(me), 2))
    y = hvd.allgather(x)
    (y * weights(me, y.shape)).sum().backward()
    # Averaged upstream gradient, this rank's rows.
    avg = torch.stack(all_weights(y.shape)).mean(0)
    start = sum(gathered_rows(r) for r in range(me))
    assert torch.allclose(x.grad, avg[start:start + gathered_rows(me)])


def test_grouped_allgather_grad():
    me = hvd.rank()
    xs = [leaf((gathered_rows(me), 2)), leaf((1,), 3)]
    ys = hvd.grouped_allgather(xs)
    sum(((y * weights(me + 5 * i, y.shape)).sum() for i, y in enumerate(ys))).backward()
    avg0 = torch.stack([weights(r, ys[0].shape) for r in range(hvd.size())]).mean(0)
    start = sum(gathered_rows(r) for r in range(me))
    assert torch.allclose(xs[0].grad, avg0[start:start + gathered_rows(me)])
    avg1 = torch.stack([weights(r + 5, ys[1].shape) for r in range(hvd.size())]).mean(0)
    assert torch.allclose(xs[1].grad, avg1[me:me + 1])


def test_broadcast_grad():
    root = hvd.size() - 1
    x = leaf((4,))
    y = hvd.broadcast(x, root)
    (y * weights(hvd.rank(), y.shape)).sum().backward()
    if hvd.rank() == root:
        assert torch.allclose(x.grad, torch.stack(all_weights((4,))).mean(0))
    else:
        assert torch.equal(x.grad, torch.zeros(4, dtype=torch.float64))


def splits_of(r, n):
    return [(r + d) % 3 + 1 for d in range(n)]


def test_alltoall_grad():
    me, n = hvd.rank(), hvd.size()
    x = leaf((sum(splits_of(me, n)), 2))
    y, received = hvd.alltoall(x, splits=splits_of(me, n))
    assert not received.requires_grad
    (y * weights(me, y.shape)).sum().backward()
    # Rows this rank sent to d come back with d's upstream gradient for them.
    expected = []
    for d in range(n):
        recv_d = [splits_of(r, n)[d] for r in range(n)]
        w_d = weights(d, (sum(recv_d), 2))
        start = sum(recv_d[:me])
        expected.append(w_d[start:start + recv_d[me]])
    assert torch.allclose(x.grad, torch.cat(expected))


def test_alltoall_grad_equal_splits():
    n = hvd.size()
    x = leaf((n, 3))
    y = hvd.alltoall(x)
    (y * weights(hvd.rank(), y.shape)).sum().backward()
    expected = torch.stack([weights(d, (n, 3))[hvd.rank()] for d in range(n)])
    assert torch.allclose(x.grad, expected)


def scattered_rows(r, total, n):
    q, extra = divmod(total, n)
    return q + (1 if r < extra else 0)


@pytest.mark.parametrize('op,pre,post', [(hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0),
                                         (hvd.Average, 2.0, 0.5)])
def test_reducescatter_grad(op, pre, post):
    n = hvd.size()
    total = 2 * n + 1
    x = leaf((total, 2))
    y = hvd.reducescatter(x, op=op, prescale_factor=pre, postscale_factor=post)
    (y * weights(hvd.rank(), y.shape)).sum().backward()
    # Horovod: the allgathered upstream gradient, times size for Sum, times
    # the scale factors.
    expected = torch.cat([weights(r, (scattered_rows(r, total, n), 2)) for r in range(n)])
    expected = expected * (n if op == hvd.Sum else 1) * pre * post
    assert torch.allclose(x.grad, expected)


def test_grouped_reducescatter_grad():
    n = hvd.size()
    xs = [leaf((n, 2)), leaf((n + 1,), 2)]
    ys = hvd.grouped_reducescatter(xs, op=hvd.Average)
    sum(((y * weights(hvd.rank() + 9 * i, y.shape)).sum() for i, y in enumerate(ys))).backward()
    for i, x in enumerate(xs):
        expected = torch.cat([weights(r + 9 * i, (scattered_rows(r, x.shape[0], n),) +
                                      tuple(x.shape[1:])) for r in range(n)])
        assert torch.allclose(x.grad, expected)
