"""DistributedOptimizer (horovod/torch/optimizer.py, Horovod 0.28 semantics):
wraps a torch optimizer so that step() uses gradients averaged over all
ranks. Each gradient's allreduce starts from a hook on its accumulator as
soon as backward() has produced it, overlapping communication with the rest
of the backward pass."""

import os
import warnings
from contextlib import contextmanager

import torch

from troupe.common.basics import rocm_built, size
from troupe.common.process_sets import global_process_set
from troupe.torch.compression import Compression
from troupe.torch.functions import broadcast_object
from troupe.torch.mpi_ops import (
    Adasum, Average, allreduce_async_, grouped_allreduce_async_, sparse_allreduce_async,
    synchronize)


def _split_list(items, n):
    """`items` in n consecutive parts whose lengths differ by at most one."""
    q, r = divmod(len(items), n)
    parts = []
    start = 0
    for i in range(n):
        end = start + q + (1 if i < r else 0)
        parts.append(items[start:end])
        start = end
    return parts


_TOO_MANY_PASSES = ('Gradients were computed more than backward_passes_per_step times before '
                    'call to step(). Increase backward_passes_per_step to accumulate '
                    'gradients locally.')
_ZERO_GRAD_RACE = ('optimizer.zero_grad() was called after loss.backward() but before '
                   'optimizer.step() or optimizer.synchronize(). This is prohibited as it can '
                   'cause a race condition.')


def _count_pass(optimizer, p):
    """Counts one backward pass over `p` (a gradient hook fired); True when
    its gradient is to be reduced now (backward_passes_per_step reached)."""
    if p in optimizer._handles and optimizer._handles[p][0] is not None:
        if optimizer._allreduce_delay[p] <= 0:
            raise AssertionError(_TOO_MANY_PASSES)
    assert not p.grad.requires_grad
    assert optimizer._allreduce_delay[p] > 0
    optimizer._allreduce_delay[p] -= 1
    return optimizer._allreduce_delay[p] == 0


def _named_parameters(param_groups, named_parameters):
    """The (name, parameter) list; default names follow Horovod's."""
    if named_parameters is None:
        return [('allreduce.noname.%d.%d' % (i, j), v)
                for i, group in enumerate(param_groups) for j, v in enumerate(group['params'])]
    named_parameters = list(named_parameters)
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError('named_parameters should be a sequence of tuples (name, parameter), '
                         'usually produced by model.named_parameters().')
    return named_parameters


def _find_duplicates(names):
    seen = set()
    dups = set()
    for name in names:
        if name in seen:
            dups.add(name)
        seen.add(name)
    return dups


class _DistributedOptimizer(torch.optim.Optimizer):
    # Mixed into a subclass of the user's optimizer class (see
    # DistributedOptimizer), so super(self.__class__, self) is that class.
    _troupe_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression

        named_parameters = _named_parameters(self.param_groups, named_parameters)
        dups = _find_duplicates([k for k, _ in named_parameters])
        if dups:
            raise ValueError('Parameter names in named_parameters must be unique. '
                             'Found duplicates: %s' % ', '.join(sorted(dups)))
        all_param_ids = {id(v) for group in self.param_groups for v in group['params']}
        named_param_ids = {id(v) for _, v in named_parameters}
        unnamed_param_ids = all_param_ids - named_param_ids
        if unnamed_param_ids:
            raise ValueError('named_parameters was specified, but one or more model parameters '
                             'were not named. Python object ids: %s' %
                             ', '.join(str(i) for i in unnamed_param_ids))

        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True

        if groups is not None:
            if not (isinstance(groups, list) or groups > 0):
                raise ValueError('groups should be a non-negative integer or a list of list of '
                                 'torch.Tensor.')
            if isinstance(groups, list):
                grouped_ids = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError('groups must consist of torch.Tensor.')
                        if id(p) in grouped_ids:
                            raise ValueError('A parameter can only appear once in groups.')
                        grouped_ids.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}

        if self.process_set.included() and (size() > 1 or
                                            os.environ.get('HOROVOD_ELASTIC') == '1'):
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        if self._groups is not None:
            self._form_groups()
        for group in self.param_groups:
            for p in group['params']:
                if p.requires_grad:
                    self._requires_update.add(p)
                    # The AccumulateGrad node fires once p.grad is final.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _form_groups(self):
        p_list = [p for group in self.param_groups for p in group['params'] if p.requires_grad]
        # Every rank forms the same groups in the same order: rank 0's.
        names = broadcast_object([self._parameter_names.get(p) for p in p_list], root_rank=0,
                                 name='troupe.optimizer.parameter_order',
                                 process_set=self.process_set)
        order = {name: i for i, name in enumerate(names)}
        p_list.sort(key=lambda p: order[self._parameter_names.get(p)])
        if isinstance(self._groups, list):
            listed = {id(p) for p in p_list}
            p_groups = [[p for p in group if id(p) in listed] for group in self._groups]
            grouped = {id(p) for group in p_groups for p in group}
            p_groups += [[p] for p in p_list if id(p) not in grouped]
        else:
            p_groups = _split_list(p_list, self._groups)
        for group in p_groups:
            group = tuple(group)
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # Another rank may have a gradient for p (dynamic graphs): every
            # rank must submit the same tensors.
            p.grad = torch.zeros_like(p)
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                return sparse_allreduce_async(tensor, name=name, op=self.op,
                                              process_set=self.process_set), None
            tensor = tensor.to_dense()
        compressed, ctx = self._compression.compress(tensor)
        if self.op == Average:
            # The runtime divides by the set size after the postscale.
            prescale_factor = 1.0 / self.gradient_predivide_factor
            postscale_factor = self.gradient_predivide_factor
        else:
            prescale_factor = 1.0
            postscale_factor = 1.0
        handle = allreduce_async_(compressed, name=name, op=self.op,
                                  prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor,
                                  process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group):
        name = self._parameter_names.get(group[0])
        compressed, ctxs = zip(*[self._compression.compress(p.grad) for p in group])
        handle = grouped_allreduce_async_(list(compressed), name=name, op=self.op,
                                          process_set=self.process_set)
        return handle, ctxs

    def _make_hook(self, p):
        def hook(*ignore):
            handle, ctx = None, None
            if _count_pass(self, p):
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        for member in group:
                            self._handles.pop(member, None)
                        self._group_counts[group] = 0
                        return
                    # (None, None): the hook fired, the group is not complete.
                    self._handles[p] = (None, None)
                    return
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Finishes every gradient's allreduce and writes the results to
        p.grad. Parameters whose hooks did not fire are submitted now."""
        if not self.process_set.included():
            self._synchronized = True
            return
        completed = set()
        for key in self._handles:
            if isinstance(key, tuple):
                completed.update(key)
            else:
                completed.add(key)
        for p in self._requires_update - completed:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in self._handles.items():
            if isinstance(p, tuple):
                outputs = synchronize(handle)
                for member, output, member_ctx in zip(p, outputs, ctx):
                    self._allreduce_delay[member] = self.backward_passes_per_step
                    member.grad.set_(self._compression.decompress(output, member_ctx))
                self._group_counts[p] = 0
                continue
            output = handle() if callable(handle) else synchronize(handle)
            self._allreduce_delay[p] = self.backward_passes_per_step
            if self._groups is not None:
                self._group_counts[self._p_to_group[p]] = 0
            if p.grad.is_sparse:
                aggregated = self._compression.decompress(output, ctx)
                if not aggregated.is_sparse:
                    aggregated = aggregated.to_sparse()
                # set_ does not take sparse tensors.
                p.grad.zero_().add_(aggregated)
            else:
                p.grad.set_(self._compression.decompress(output, ctx))
        self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (the caller did,
        e.g. to clip gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn('optimizer.step() called without optimizer.skip_synchronize() '
                              'context after optimizer.synchronize(). This can cause training '
                              'slowdown. You may want to consider using '
                              'optimizer.skip_synchronize() context if you use '
                              'optimizer.synchronize() in your code.')
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(_ZERO_GRAD_RACE)
        return super(self.__class__, self).zero_grad(*args, **kwargs)


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    # Horovod's delta optimizer for op=Adasum: each parameter's hook runs the
    # wrapped optimizer on that parameter alone, and the change it made
    # (the delta) is what gets Adasum-reduced; step() applies the reduced
    # deltas to the starting point.
    _troupe_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        named_parameters = _named_parameters(self.param_groups, named_parameters)
        self._parameter_names = {v: k for k, v in named_parameters}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for _, p in named_parameters}
        self._register_hooks()

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group['params']:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
                    self._requires_update.add(p)
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        start = self._starting_models[p]
        stashed = []
        for group in self.param_groups:
            stashed.append(group['params'])
            group['params'] = [p] if any(p is v for v in group['params']) else []
        start.data.copy_(p)
        super(self.__class__, self).step()
        for params, group in zip(stashed, self.param_groups):
            group['params'] = params
        p.data.sub_(start)  # the delta, reduced in place
        compressed, ctx = self._compression.compress(p)
        handle = allreduce_async_(compressed.data, name=self._parameter_names.get(p), op=Adasum)
        return handle, ctx

    def _make_hook(self, p):
        def hook(*ignore):
            handle, ctx = None, None
            if _count_pass(self, p):
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Nothing to do: step() applies the reduced deltas."""

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError('Skipping synchronization is not supported when using Adasum '
                             'optimizer.')

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in self._handles.items():
            if handle is None:
                handle, ctx = self._allreduce_grad_async(p)
            delta = self._compression.decompress(synchronize(handle), ctx)
            start = self._starting_models[p]
            start.data.add_(delta.data)
            p.data.copy_(start)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(_ZERO_GRAD_RACE)
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Returns an optimizer of the same class as `optimizer` (sharing its
    param_groups) whose step() averages gradients over all ranks first."""
    if gradient_predivide_factor != 1.0:
        if rocm_built():
            raise ValueError('gradient_predivide_factor not supported yet with ROCm')
        if op != Average:
            raise ValueError('gradient_predivide_factor not supported with op != Average')
    if num_groups != 0:
        warnings.warn('Parameter `num_groups` has been replaced by `groups` and will be removed '
                      'in v0.23.0.', DeprecationWarning)
        if groups is None:
            groups = num_groups
    if op != Adasum or size() == 1:
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
                   dict(_DistributedOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression,
                   backward_passes_per_step, op, gradient_predivide_factor, groups,
                   sparse_as_dense, process_set)
    if process_set is not global_process_set:
        raise NotImplementedError('Adasum does not support non-global process sets yet.')
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step)
