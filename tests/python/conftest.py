"""Every rank of a troupe-run job runs the same pytest session, so tests run
in the same order everywhere and their collectives match up."""

import pytest
import torch

import troupe.torch as hvd

# One thread per rank: the ranks share a small machine.
torch.set_num_threads(1)

# Every dtype troupe.torch hands to the runtime.
ALL_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
              torch.bfloat16, torch.float32, torch.float64, torch.bool]


@pytest.fixture(scope='session', autouse=True)
def runtime():
    hvd.init()
    yield
    hvd.shutdown()


@pytest.fixture
def needs_peers():
    """For tests of what ranks do to each other."""
    if hvd.size() == 1:
        pytest.skip('needs at least 2 ranks')


def rank_tensor(r, shape, dtype):
    """Rank r's input: small integers (exact in every dtype, also as sums and
    products over a few ranks), different on every rank."""
    g = torch.Generator().manual_seed(1000 + r)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    low = 0 if dtype == torch.uint8 else -4
    return torch.randint(low, 5, shape, generator=g).to(dtype)


def all_rank_tensors(shape, dtype):
    return [rank_tensor(r, shape, dtype) for r in range(hvd.size())]


def adasum_reference(vectors):
    """Horovod's Adasum of per-rank tensors, combined pairwise in rank order:
    a + b -> (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b."""
    vectors = [v.double() for v in vectors]
    while len(vectors) > 1:
        merged = []
        for a, b in zip(vectors[0::2], vectors[1::2]):
            dot = torch.dot(a.flatten(), b.flatten())
            merged.append((1 - dot / (2 * torch.dot(a.flatten(), a.flatten()))) * a +
                          (1 - dot / (2 * torch.dot(b.flatten(), b.flatten()))) * b)
        vectors = merged
    return vectors[0]
