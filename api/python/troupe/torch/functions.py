"""Helpers to start training from the same state on every rank
(horovod/torch/functions.py)."""

import collections
import pickle

import torch

from troupe.common.basics import rank, size
from troupe.common.process_sets import check_process_set, global_process_set
from troupe.torch.mpi_ops import (
    allgather, broadcast_, broadcast_async_, synchronize)


def broadcast_parameters(params, root_rank, prefix='Parameter.'):
    """Overwrites every rank's parameters with root_rank's.

    `params`: a dict (a model's state_dict(), sorted by key) or a list of
    parameters or (name, parameter) tuples (model.named_parameters())."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError('invalid params of type: %s' % type(params))
    handles = [broadcast_async_(p, root_rank, None if name is None else prefix + name)
               for name, p in params]
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank, model=None, prefix='Parameter.'):
    """Overwrites every rank's optimizer state (tensors and options such as
    the learning rate) with root_rank's. A fresh optimizer's state is
    created first by a step with zero gradients, as Horovod does: every
    parameter's gradient is replaced by zeros (sparse ones for SparseAdam,
    which refuses dense gradients), so local gradients do not move the
    parameters, which stay the same on every rank. The third argument
    is Horovod's `model` (the state needs nothing of it here), or, as in
    Horovod versions whose third parameter is `prefix`, a name prefix."""
    if isinstance(model, str):
        model, prefix = None, model
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError('cannot broadcast torch.optim.LBFGS state')
    state_dict = optimizer.state_dict()
    if not state_dict['state']:
        sparse = isinstance(optimizer, torch.optim.SparseAdam)
        for group in optimizer.param_groups:
            for p in group['params']:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
                    if sparse:
                        p.grad = p.grad.to_sparse()
        # A DistributedOptimizer's step() would allreduce: step the wrapped
        # optimizer class directly.
        if getattr(optimizer, '_troupe_distributed', False):
            super(optimizer.__class__, optimizer).step()
        else:
            optimizer.step()
        state_dict = optimizer.state_dict()
    if not state_dict['state']:
        return  # a stateless optimizer

    # state_dict() refers to the live state tensors, so broadcasting them in
    # place updates the optimizer; other values travel as one pickled object.
    params_by_id = {}
    for group, saved_group in zip(optimizer.param_groups, state_dict['param_groups']):
        params_by_id.update(zip(saved_group['params'], group['params']))
    tensors = []
    scalars = {}
    occurrences = collections.defaultdict(int)
    for index, group in enumerate(state_dict['param_groups']):
        for key, value in group.items():
            if key != 'params':
                scalars[('option', index, key)] = value
        for pid in group['params']:
            for name, value in state_dict['state'].get(pid, {}).items():
                occurrences[name] += 1
                if torch.is_tensor(value):
                    tensors.append(('%s%s.%d' % (prefix, name, occurrences[name]), value))
                else:
                    scalars[('state', pid, name)] = value
    broadcast_parameters(tensors, root_rank, prefix='')
    scalars = broadcast_object(scalars, root_rank, name=prefix + 'optimizer_scalars')
    for (kind, where, key), value in scalars.items():
        if kind == 'option':
            optimizer.param_groups[where][key] = value
        else:
            optimizer.state[params_by_id[where]][key] = value


# cloudpickle, as Horovod: lambdas, closures and classes defined in a
# function travel too; what it writes is read back by pickle. Where it is
# not installed (scripts/setup.sh installs python3-cloudpickle), plain
# pickle, which refuses those.
def _to_bytes(obj):
    try:
        import cloudpickle
        dumps = cloudpickle.dumps
    except ImportError:
        dumps = pickle.dumps
    return torch.frombuffer(bytearray(dumps(obj)), dtype=torch.uint8)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's `obj` (cloudpickled) on every rank."""
    check_process_set(process_set)
    if name is None:
        name = type(obj).__name__
    if rank() == root_rank:
        payload = _to_bytes(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
        broadcast_(length, root_rank, name + '.sz', process_set)
    else:
        length = torch.zeros(1, dtype=torch.int64)
        broadcast_(length, root_rank, name + '.sz', process_set)
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name + '.t', process_set)
    if rank() == root_rank:
        return obj
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None):
    """Returns the list of every rank's `obj` (cloudpickled), in rank order."""
    if name is None:
        name = type(obj).__name__
    payload = _to_bytes(obj)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64),
                        name=name + '.sz').tolist()
    gathered = allgather(payload, name=name + '.t').numpy()
    objects = []
    start = 0
    for i in range(size()):
        objects.append(pickle.loads(gathered[start:start + lengths[i]].tobytes()))
        start += lengths[i]
    return objects
