"""CUDA tensors: every collective gives on the GPU what it gives on the CPU
(the CPU results are checked against references in test_collectives).
Skipped where torch sees no GPU (CI, the development machines)."""

import pytest
import torch

import troupe.torch as hvd
from conftest import rank_tensor

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='no CUDA device')

SHAPE = (6, 4)
DTYPES = [torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
REDUCE_OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def device():
    return torch.device('cuda', hvd.local_rank() % torch.cuda.device_count())


def both(dtype, shape=SHAPE):
    cpu = rank_tensor(hvd.rank(), shape, dtype)
    return cpu, cpu.to(device())


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('op', REDUCE_OPS)
def test_allreduce_matches_the_cpu(dtype, op):
    cpu, gpu = both(dtype)
    want = hvd.allreduce(cpu, op=op, name='cpu.ar')
    got = hvd.allreduce(gpu, op=op, name='gpu.ar')
    assert got.device == gpu.device
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize('dtype', [torch.uint8, torch.float16, torch.float64])
@pytest.mark.parametrize('count', [1, 17, 1000, 4099, 1 << 16])
def test_allreduce_of_counts_that_do_not_divide_evenly(dtype, count):
    """Under TROUPE_HIERARCHICAL_ALLREDUCE a host's ranks take aligned
    shares; what does not divide goes through the flat communicator."""
    cpu, gpu = both(dtype, (count,))
    want = hvd.allreduce(cpu, op=hvd.Sum, name='cpu.odd')
    got = hvd.allreduce(gpu, op=hvd.Sum, name='gpu.odd')
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16, torch.float32])
def test_allgather_broadcast_alltoall_reducescatter_match_the_cpu(dtype):
    cpu, gpu = both(dtype)
    for name, f in [('ag', hvd.allgather), ('bc', lambda t, name: hvd.broadcast(t, 0, name=name)),
                    ('a2a', hvd.alltoall), ('rs', hvd.reducescatter)]:
        want = f(cpu, name='cpu.' + name)
        got = f(gpu, name='gpu.' + name)
        if isinstance(want, tuple):
            want, got = want[0], got[0]
        assert got.device == gpu.device, name
        assert torch.equal(got.cpu(), want), name


def test_many_small_tensors_are_fused_and_correct():
    tensors = [rank_tensor(hvd.rank(), (n % 7 + 1,), torch.float32).to(device()) for n in range(200)]
    handles = [hvd.allreduce_async(t, op=hvd.Sum, name='small.%d' % i)
               for i, t in enumerate(tensors)]
    for t, h in zip(tensors, handles):
        assert torch.equal(hvd.synchronize(h).cpu(), hvd.allreduce(t.cpu(), op=hvd.Sum))


def test_the_producers_stream_is_waited_for():
    side = torch.cuda.Stream(device())
    with torch.cuda.stream(side):
        t = torch.ones(1 << 20, device=device())
        torch.cuda._sleep(10_000_000)  # the fill below comes long after submission
        t.fill_(2.0)
        got = hvd.allreduce(t, op=hvd.Sum, name='stream')
    assert torch.all(got.cpu() == 2.0 * hvd.size())
