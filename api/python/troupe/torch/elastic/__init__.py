"""troupe.torch.elastic: horovod.torch.elastic's API on Troupe's in-place
reset (docs/elastic.md)."""

from troupe.common.elastic import run_fn
from troupe.torch.handles import reset as _reset
from troupe.torch.elastic.sampler import ElasticSampler
from troupe.torch.elastic.state import (
    TorchState, ModelStateHandler, OptimizerStateHandler, SamplerStateHandler, StateHandler,
    get_handler_registry, set_handler_registry)


def run(func):
    """Decorator for the training function `func(state, ...)`: it is
    restarted from the last commit after a lost peer, and with the new
    membership after troupe-run adds or removes hosts."""
    return run_fn(func, _reset)


__all__ = ['run', 'ElasticSampler', 'TorchState', 'StateHandler', 'ModelStateHandler',
           'OptimizerStateHandler', 'SamplerStateHandler', 'get_handler_registry',
           'set_handler_registry']
