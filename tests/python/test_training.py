"""Training helpers. Each rank trains on its shard of every global batch; the
single-process reference (plain torch on whole batches) is computed in
process on every rank, and the parameters must agree."""

import pytest
import torch
import torch.nn.functional as F

import troupe.torch as hvd
from conftest import adasum_reference

STEPS = 4
BATCH_PER_RANK = 4


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def global_batch(step):
    g = torch.Generator().manual_seed(step)
    n = BATCH_PER_RANK * hvd.size()
    return torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


def shard(tensor):
    r = hvd.rank()
    return tensor[r * BATCH_PER_RANK:(r + 1) * BATCH_PER_RANK]


def loss_of(model, x, y):
    return F.cross_entropy(model(x), y)


def reference_params(passes_per_step=1, clip=None):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        opt.zero_grad()
        for micro in range(passes_per_step):
            x, y = global_batch(step * passes_per_step + micro)
            loss_of(model, x, y).backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
    return [p.detach() for p in model.parameters()]


def distributed_params(passes_per_step=1, clip=None, **kwargs):
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes_per_step, **kwargs)
    for step in range(STEPS):
        opt.zero_grad()
        for micro in range(passes_per_step):
            x, y = global_batch(step * passes_per_step + micro)
            loss_of(model, shard(x), shard(y)).backward()
        if clip:
            opt.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
    return [p.detach() for p in model.parameters()]


def assert_params_close(actual, expected, atol=1e-5):
    for a, e in zip(actual, expected):
        assert torch.allclose(a, e, atol=atol), (a - e).abs().max()


@pytest.mark.parametrize('kwargs', [{}, {'groups': 2}, {'gradient_predivide_factor': 2.0}])
def test_distributed_optimizer_matches_single_process(kwargs):
    assert_params_close(distributed_params(**kwargs), reference_params())


def test_explicit_groups_match_single_process():
    model = make_model()
    params = list(model.parameters())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters(),
                                   groups=[[params[0], params[3]], [params[1]]])
    for step in range(STEPS):
        opt.zero_grad()
        x, y = global_batch(step)
        loss_of(model, shard(x), shard(y)).backward()
        opt.step()
    assert_params_close([p.detach() for p in params], reference_params())


def test_fp16_compression_is_close():
    assert_params_close(distributed_params(compression=hvd.Compression.fp16),
                        reference_params(), atol=1e-2)


def test_backward_passes_per_step_accumulates_locally():
    # Two micro-batches per step: gradients sum locally, then average over
    # ranks, like the reference summing two whole-batch gradients.
    assert_params_close(distributed_params(passes_per_step=2), reference_params(2))


def test_synchronize_then_skip_synchronize():
    assert_params_close(distributed_params(clip=0.5), reference_params(clip=0.5))


def test_adasum_optimizer_reduces_the_deltas():
    if hvd.size() & (hvd.size() - 1):
        pytest.skip('Adasum needs a power-of-two number of ranks')
    lr = 0.1
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    x, y = global_batch(0)
    loss_of(model, shard(x), shard(y)).backward()
    opt.step()
    # Reference: each rank's SGD delta (-lr * its gradient), Adasum-combined
    # per parameter, added to the starting parameters.
    deltas = []
    for r in range(hvd.size()):
        ref = make_model()
        rows = slice(r * BATCH_PER_RANK, (r + 1) * BATCH_PER_RANK)
        loss_of(ref, x[rows], y[rows]).backward()
        deltas.append([-lr * p.grad for p in ref.parameters()])
    for i, (p, start) in enumerate(zip(model.parameters(), make_model().parameters())):
        expected = start.double() + adasum_reference([d[i] for d in deltas])
        assert torch.allclose(p.double(), expected, atol=1e-6)


def test_wrapper_keeps_the_optimizer_class():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    assert isinstance(opt, torch.optim.SGD)
    assert type(opt).__name__ == 'SGD'


def test_misuse_is_reported():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    x, y = global_batch(0)
    loss_of(model, shard(x), shard(y)).backward()
    if hvd.size() > 1:
        with pytest.raises(AssertionError, match='zero_grad\\(\\) was called after'):
            opt.zero_grad()
        with pytest.raises(AssertionError, match='more than backward_passes_per_step'):
            loss_of(model, shard(x), shard(y)).backward()
    opt.synchronize()
    with pytest.warns(UserWarning, match='skip_synchronize'):
        opt.step()
    with pytest.raises(ValueError, match='must be unique'):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[('a', p) for p in model.parameters()])
    with pytest.raises(ValueError, match='were not named'):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=list(model.named_parameters())[:1])
    with pytest.raises(ValueError, match='op != Average'):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum,
                                 gradient_predivide_factor=2.0)


def test_unused_parameters_get_zero_gradients():
    # A parameter without a gradient on this rank is still submitted.
    model = make_model()
    extra = torch.nn.Parameter(torch.ones(2))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(list(model.parameters()) + [extra], lr=1.0))
    x, y = global_batch(0)
    loss = loss_of(model, shard(x), shard(y))
    if hvd.rank() == 0:
        loss = loss + extra.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert torch.allclose(extra.detach(), torch.full((2,), 1.0 - 1.0 / hvd.size()))


@pytest.mark.parametrize('sparse_as_dense', [False, True])
def test_sparse_gradients(sparse_as_dense):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 3, sparse=True)
    ref = torch.nn.Embedding(10, 3)
    ref.weight.data.copy_(emb.weight.data)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.5),
                                   named_parameters=emb.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    indices = torch.arange(10).view(-1, 2)[:hvd.size()]
    emb(indices[hvd.rank()]).sum().backward()
    opt.step()
    # Reference: mean over ranks of each rank's gradient.
    (ref(indices).sum() / hvd.size()).backward()
    torch.optim.SGD(ref.parameters(), lr=0.5).step()
    assert torch.allclose(emb.weight, ref.weight)


def test_broadcast_parameters():
    model = make_model(seed=hvd.rank())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for a, b in zip(model.parameters(), make_model(seed=0).parameters()):
        assert torch.equal(a, b)
    model = make_model(seed=hvd.rank())
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=hvd.size() - 1)
    for a, b in zip(model.parameters(), make_model(seed=hvd.size() - 1).parameters()):
        assert torch.equal(a, b)


def test_broadcast_parameters_into_non_contiguous_parameters():
    # A channels_last model's weights are leaves that require grad and are
    # not contiguous: they are written back from a contiguous copy, which
    # autograd must not see as an in-place operation on a leaf.
    def channels_last_model(seed):
        torch.manual_seed(seed)
        return torch.nn.Conv2d(2, 4, 3).to(memory_format=torch.channels_last)
    model = channels_last_model(hvd.rank())
    assert not model.weight.is_contiguous() and model.weight.requires_grad
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=0)
    for a, b in zip(model.parameters(), channels_last_model(0).parameters()):
        assert torch.equal(a, b) and a.is_leaf and a.requires_grad
    torch.manual_seed(hvd.rank())
    param = torch.nn.Parameter(torch.randn(4, 3).t())
    assert not param.is_contiguous()
    assert hvd.broadcast_(param, hvd.size() - 1) is param
    torch.manual_seed(hvd.size() - 1)
    assert torch.equal(param, torch.randn(4, 3).t())


def test_broadcast_optimizer_state_ignores_local_gradients_of_a_fresh_optimizer():
    # As Horovod: the step that creates the state runs on zero gradients,
    # so each rank's own gradients do not move its (broadcast) parameters.
    torch.manual_seed(hvd.rank())
    model = torch.nn.Linear(4, 3)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    before = model.weight.detach().clone()
    model(torch.full((2, 4), float(hvd.rank() + 1))).sum().backward()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert torch.equal(model.weight.detach(), before)
    assert all(torch.count_nonzero(p.grad) == 0 for p in model.parameters())
    rows = hvd.allgather(model.weight.detach().reshape(1, -1), name='weights.after.state')
    assert all(torch.equal(row, rows[0]) for row in rows)


@pytest.mark.parametrize('optimizer', ['adam', 'sgd'])
def test_broadcast_optimizer_state(optimizer):
    model = make_model(seed=0)
    lr = 0.01 * (hvd.rank() + 1)
    if optimizer == 'adam':
        opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.8 + 0.01 * hvd.rank(), 0.99))
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.5 + 0.1 * hvd.rank())
    # A different local step on each rank gives different state.
    x, y = global_batch(hvd.rank())
    loss_of(model, x, y).backward()
    opt.step()
    root_state = [s.clone() if torch.is_tensor(s) else s
                  for p in model.parameters() for s in opt.state[p].values()]
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]['lr'] == 0.01
    if optimizer == 'adam':
        assert opt.param_groups[0]['betas'] == (0.8, 0.99)
    else:
        assert opt.param_groups[0]['momentum'] == 0.5
    state = [s for p in model.parameters() for s in opt.state[p].values()]
    gathered = hvd.allgather_object([s.tolist() if torch.is_tensor(s) else s for s in state])
    assert all(g == gathered[0] for g in gathered)
    if hvd.rank() == 0:
        assert all(torch.equal(a, b) for a, b in zip(state, root_state))


def test_broadcast_optimizer_state_initializes_a_fresh_optimizer():
    model = make_model(seed=0)
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.001))
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert len(opt.state) == len(list(model.parameters()))


def test_broadcast_optimizer_state_takes_the_model_third_and_a_fresh_sparse_adam():
    # Horovod's signature: (optimizer, root_rank, model=None). SparseAdam
    # refuses dense gradients, so its fresh state is made from sparse ones.
    model = torch.nn.Embedding(10, 3, sparse=True)
    opt = torch.optim.SparseAdam(model.parameters(), lr=0.01 * (hvd.rank() + 1))
    hvd.broadcast_optimizer_state(opt, 0, model)
    assert opt.param_groups[0]['lr'] == 0.01
    assert len(opt.state) == 1
    # A name prefix in that place, as other Horovod versions take it.
    opt.param_groups[0]['lr'] = 0.5 * (hvd.rank() + 1)
    hvd.broadcast_optimizer_state(opt, 0, 'Second.')
    assert opt.param_groups[0]['lr'] == 0.5


def test_broadcast_and_allgather_object_carry_what_only_cloudpickle_can():
    # Horovod pickles with cloudpickle: a lambda and a class defined here.
    class Local:
        def __init__(self, r):
            self.r = r

    scale = 10 * (hvd.rank() + 1)
    fn = hvd.broadcast_object(lambda x: x * scale, root_rank=0, name='fn')
    assert fn(2) == 20
    everyone = hvd.allgather_object(Local(hvd.rank()), name='local')
    assert [o.r for o in everyone] == list(range(hvd.size()))


def test_broadcast_and_allgather_object():
    obj = {'rank': hvd.rank(), 'payload': list(range(hvd.rank() * 100))}
    assert hvd.broadcast_object(obj, root_rank=0) == {'rank': 0, 'payload': []}
    root = hvd.size() - 1
    got = hvd.broadcast_object(obj, root_rank=root, name='named')
    assert got['rank'] == root and len(got['payload']) == root * 100
    everyone = hvd.allgather_object(obj)
    assert [o['rank'] for o in everyone] == list(range(hvd.size()))
    assert [len(o['payload']) for o in everyone] == [r * 100 for r in range(hvd.size())]


def test_sync_batch_norm_keeps_a_small_spread_around_a_large_mean():
    # float32, mean 300, std 0.01: E[x^2] - E[x]^2 cancelled to NaN or 0
    # here; the ranks' centred statistics combine to batch norm's answer.
    n = hvd.size()
    g = torch.Generator().manual_seed(5)
    full = 300 + 0.01 * torch.randn(4 * n, 2, 8, generator=g)
    rows = slice(4 * hvd.rank(), 4 * hvd.rank() + 4)
    sync_bn = hvd.SyncBatchNorm(2)
    bn = torch.nn.BatchNorm1d(2).double()  # the exact answer for these inputs
    out = sync_bn(full[rows])
    ref = bn(full.double())[rows]
    assert torch.isfinite(out).all()
    # float32 itself gets x - mean to 1.5e-5 here: 1.5e-3 after dividing by
    # the spread (torch's own BatchNorm1d in float32 is off by 1.1e-3).
    assert torch.allclose(out.double(), ref, atol=5e-3), (out - ref).abs().max()
    # The batch variance (about 1e-4) the running variance took in.
    batch_var = (sync_bn.running_var.double() - 0.9) / 0.1
    assert torch.allclose(batch_var, (bn.running_var - 0.9) / 0.1, rtol=2e-2), batch_var


def test_sync_batch_norm_matches_whole_batch_batch_norm():
    n = hvd.size()
    g = torch.Generator().manual_seed(3)
    full = torch.randn(2 * n, 3, 5, generator=g, dtype=torch.float64) * 2 + 1
    upstream = torch.randn(2 * n, 3, 5, generator=g, dtype=torch.float64)
    rows = slice(2 * hvd.rank(), 2 * hvd.rank() + 2)

    sync_bn = hvd.SyncBatchNorm(3).double()
    bn = torch.nn.BatchNorm1d(3).double()
    with torch.no_grad():
        for m in (sync_bn, bn):
            m.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
            m.bias.copy_(torch.tensor([0.0, -1.0, 0.3]))

    x = full[rows].clone().requires_grad_()
    out = sync_bn(x)
    (out * upstream[rows]).sum().backward()
    ref_x = full.clone().requires_grad_()
    ref_out = bn(ref_x)
    (ref_out * upstream).sum().backward()

    assert torch.allclose(out, ref_out[rows])
    assert torch.allclose(x.grad, ref_x.grad[rows])
    # Parameter gradients are per-rank parts of the whole-batch gradient.
    assert torch.allclose(hvd.allreduce(sync_bn.weight.grad, op=hvd.Sum), bn.weight.grad)
    assert torch.allclose(hvd.allreduce(sync_bn.bias.grad, op=hvd.Sum), bn.bias.grad)
    assert torch.allclose(sync_bn.running_mean, bn.running_mean)
    assert torch.allclose(sync_bn.running_var, bn.running_var)
    # Evaluation uses the running statistics, no communication.
    sync_bn.eval()
    bn.eval()
    assert torch.allclose(sync_bn(full[rows]), bn(full)[rows])
