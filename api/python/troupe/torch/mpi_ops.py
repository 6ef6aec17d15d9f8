"""Collectives on torch tensors, with Horovod's names, signatures and return
values (horovod/torch/mpi_ops.py).

Tensors reach the runtime as (data pointer, dtype code, shape): a contiguous
CPU tensor is read and written where it lies; a non-contiguous one goes
through a contiguous copy (copied back for in-place ops). Results sized by
negotiation (allgather, alltoall, reducescatter) are written directly where
they end up: on the CPU into the runtime's own memory, wrapped as the tensor
afterwards (handles._Output); on a GPU into a tensor the runtime allocates
through a callback. The objects owning that memory stay referenced by the
core handle until the collective is over.
Handles, names and codes are in troupe.torch.handles.
"""

import torch

from troupe import _core
from troupe.common import basics as _basics
from troupe.common.exceptions import HorovodInternalError
from troupe.common.process_sets import check_process_set, global_process_set
from troupe.torch.compression import Compression
# Horovod's scripts import these from mpi_ops too.
from troupe.torch.handles import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum, _Output, _check_bool_average, _copy_back,
    _device, _dtype_code, _empty_like, _op_name, _register, _resolve_op, _wait, init, poll,
    reset, shutdown, synchronize)


# ---------------------------------------------------------------- allreduce

def _allreduce_async(tensor, inplace, name, op, prescale_factor, postscale_factor,
                     process_set):
    ps_id = check_process_set(process_set)
    code = _dtype_code(tensor)
    _check_bool_average((tensor,), op)
    src = tensor.contiguous()
    dst = src if inplace else _empty_like(src)
    key = _op_name('allreduce', name, ps_id)
    core_handle = _core.allreduce(src.data_ptr(), dst.data_ptr(), code, list(src.shape),
                                  key[1], op, float(prescale_factor),
                                  float(postscale_factor), (src, dst), process_set_id=ps_id,
                                  device=_device(src))
    if not inplace:
        return _register(core_handle, lambda _: dst, key)

    def finish(_):
        _copy_back((tensor,), (src,))
        return tensor
    return _register(core_handle, finish, key)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce into a new tensor; returns a handle."""
    op = _resolve_op(op, average)
    return _allreduce_async(tensor, False, name, op, prescale_factor, postscale_factor,
                            process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce of `tensor`; returns a handle."""
    op = _resolve_op(op, average)
    return _allreduce_async(tensor, True, name, op, prescale_factor, postscale_factor,
                            process_set)


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce; its gradient is the same allreduce of the gradient."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor,
                process_set):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        return (allreduce(grad_output, average=ctx.average, op=ctx.op,
                          prescale_factor=ctx.prescale_factor,
                          postscale_factor=ctx.postscale_factor,
                          process_set=ctx.process_set),
                None, None, None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` over all ranks (default: Average) into a new tensor.
    Differentiable."""
    compressed, ctx = compression.compress(tensor)
    if compressed.requires_grad and torch.is_grad_enabled():
        reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor,
                                         postscale_factor, process_set)
    else:  # nothing to differentiate: no autograd node (the common, hot case)
        reduced = synchronize(allreduce_async(compressed, average, name, op, prescale_factor,
                                              postscale_factor, process_set))
    return compression.decompress(reduced, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _grouped_allreduce_async(tensors, inplace, name, op, prescale_factor, postscale_factor,
                             process_set):
    ps_id = check_process_set(process_set)
    tensors = list(tensors)
    codes = [_dtype_code(t) for t in tensors]
    _check_bool_average(tensors, op)
    srcs = [t.contiguous() for t in tensors]
    dsts = srcs if inplace else [_empty_like(s) for s in srcs]
    key = _op_name('grouped_allreduce', name, ps_id)
    core_handle = _core.grouped_allreduce(
        [s.data_ptr() for s in srcs], [d.data_ptr() for d in dsts], codes,
        [list(s.shape) for s in srcs], key[1], op,
        float(prescale_factor), float(postscale_factor), (srcs, dsts), process_set_id=ps_id,
        device=_device(*srcs))
    if not inplace:
        return _register(core_handle, lambda _: dsts, key)

    def finish(_):
        _copy_back(tensors, srcs)
        return tensors
    return _register(core_handle, finish, key)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts one allreduce of a list of tensors, negotiated and run as a
    whole; the handle's result is the list of reduced tensors."""
    op = _resolve_op(op, average)
    return _grouped_allreduce_async(tensors, False, name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """In-place grouped_allreduce_async."""
    op = _resolve_op(op, average)
    return _grouped_allreduce_async(tensors, True, name, op, prescale_factor,
                                    postscale_factor, process_set)


class HorovodGroupedAllreduce(torch.autograd.Function):
    """Grouped allreduce; its gradient is the same grouped allreduce."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set,
                *tensors):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allreduce_async(
            tensors, average, name, op, prescale_factor, postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce(list(grad_output), average=ctx.average, op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces a list of tensors as one group; returns the list of results.
    Differentiable."""
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    if torch.is_grad_enabled() and any(t.requires_grad for t in compressed):
        reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor,
                                                postscale_factor, process_set, *compressed)
    else:  # nothing to differentiate: no autograd node, as allreduce
        reduced = synchronize(grouped_allreduce_async(compressed, average, name, op,
                                                      prescale_factor, postscale_factor,
                                                      process_set))
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors in place as one group; returns them."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Allreduce of a sparse tensor as two allgathers (indices, values);
    returns a callable that waits and gives the reduced sparse tensor."""
    t = tensor.coalesce()
    # allgather concatenates along dim 0: indices are transposed there and back.
    indices_handle = allgather_async(t.indices().transpose(0, 1).contiguous(),
                                     name='%s.indices' % name, process_set=process_set)
    values_handle = allgather_async(t.values(), name='%s.values' % name,
                                    process_set=process_set)

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / process_set.size()
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size())
    return handle


# ---------------------------------------------------------------- allgather

def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's tensor along dim 0; returns a handle."""
    ps_id = check_process_set(process_set)
    code = _dtype_code(tensor)
    src = tensor.contiguous()
    out = _Output(src.dtype, src.device)
    key = _op_name('allgather', name, ps_id)
    core_handle = _core.allgather(src.data_ptr(), code, list(src.shape),
                                  key[1], src, out.allocator, process_set_id=ps_id,
                                  device=_device(src))
    return _register(core_handle, out.result, key)


def _own_rows(gathered_first_dims, process_set):
    r = process_set.rank()
    return int(gathered_first_dims[:r].sum()) if r else 0


class HorovodAllgather(torch.autograd.Function):
    """Allgather; the gradient is this rank's rows of the averaged gradient."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0] if tensor.dim() else 0  # scalars: the core says no
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int32),
                         process_set=ctx.process_set)
        offset = _own_rows(dims, ctx.process_set)
        return grad_reduced.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along dim 0 (first dims may differ).
    Differentiable."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts allgathers of a list of tensors as one group."""
    ps_id = check_process_set(process_set)
    tensors = list(tensors)
    codes = [_dtype_code(t) for t in tensors]
    srcs = [t.contiguous() for t in tensors]
    outs = [_Output(s.dtype, s.device) for s in srcs]
    key = _op_name('grouped_allgather', name, ps_id)
    core_handle = _core.grouped_allgather([s.data_ptr() for s in srcs], codes,
                                          [list(s.shape) for s in srcs],
                                          key[1], srcs, [o.allocator for o in outs],
                                          process_set_id=ps_id, device=_device(*srcs))
    return _register(core_handle, lambda h: [o.result(h, i) for i, o in enumerate(outs)], key)


class HorovodGroupedAllgather(torch.autograd.Function):
    """Grouped allgather; gradients as for allgather, member by member."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] if t.dim() else 0 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(tensors, name, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce(list(grad_output), op=Average, process_set=ctx.process_set)
        dims = grouped_allgather([torch.tensor([d], dtype=torch.int32) for d in ctx.dims],
                                 process_set=ctx.process_set)
        return (None, None, *[g.narrow(0, _own_rows(d, ctx.process_set), n)
                              for g, d, n in zip(grads, dims, ctx.dims)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers a list of tensors as one group; returns the list of results.
    Differentiable."""
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# ---------------------------------------------------------------- broadcast

def _broadcast_async(tensor, inplace, root_rank, name, process_set):
    ps_id = check_process_set(process_set)
    code = _dtype_code(tensor)
    data = tensor.contiguous() if inplace else _empty_like(tensor).copy_(tensor)
    key = _op_name('broadcast', name, ps_id)
    core_handle = _core.broadcast(data.data_ptr(), code, list(data.shape), int(root_rank),
                                  key[1], data, process_set_id=ps_id, device=_device(data))
    if not inplace:
        return _register(core_handle, lambda _: data, key)

    def finish(_):
        _copy_back((tensor,), (data,))
        return tensor
    return _register(core_handle, finish, key)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast of root_rank's tensor into a new tensor."""
    return _broadcast_async(tensor, False, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast of root_rank's tensor."""
    return _broadcast_async(tensor, True, root_rank, name, process_set)


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast; the gradient is the averaged gradient on the root, zero
    elsewhere."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if _basics.rank() != ctx.root_rank:
            grad_reduced *= 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's tensor on every rank. Differentiable."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's and returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---------------------------------------------------------------- alltoall

def _split_list(splits):
    if splits is None:
        return []
    if not isinstance(splits, torch.Tensor):
        splits = torch.tensor(splits, dtype=torch.int32)
    if splits.dim() != 1:
        raise ValueError('alltoall expects a 1D splits tensor')
    if splits.dtype != torch.int32:
        raise ValueError('alltoall expects splits to contain 32-bit integer elements.')
    return splits.tolist()


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall: `splits[r]` rows go to rank r (None: equal parts).
    The handle's result is (output, received_splits)."""
    ps_id = check_process_set(process_set)
    code = _dtype_code(tensor)
    split_list = _split_list(splits)
    src = tensor.contiguous()
    out = _Output(src.dtype, src.device)
    key = _op_name('alltoall', name, ps_id)
    core_handle = _core.alltoall(src.data_ptr(), code, list(src.shape),
                                 key[1], split_list, src, out.allocator,
                                 process_set_id=ps_id, device=_device(src))
    return _register(core_handle, lambda h: (
        out.result(h), torch.tensor(h.received_splits(0), dtype=torch.int32)), key)


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall; the gradient goes back with the received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received_splits = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.recvsplits = received_splits
        if splits is None:
            return output
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = alltoall(grad_output, splits=ctx.recvsplits, process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters rows of `tensor` to every rank and gathers theirs. Returns the
    output, or (output, received_splits) when `splits` is given.
    Differentiable."""
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


# ---------------------------------------------------------------- reducescatter

def _register_reducescatter(core_handle, finish, key, op):
    # The runtime rejects reduce ops other than Average and Sum as bad
    # arguments (ValueError); for Adasum, Horovod raises its internal error.
    try:
        return _register(core_handle, finish, key)
    except ValueError as e:
        if op == Adasum:
            raise HorovodInternalError(str(e)) from None
        raise


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reduction whose result is split over the ranks along dim 0."""
    ps_id = check_process_set(process_set)
    code = _dtype_code(tensor)
    _check_bool_average((tensor,), op)
    src = tensor.contiguous()
    out = _Output(src.dtype, src.device)
    key = _op_name('reducescatter', name, ps_id)
    core_handle = _core.reducescatter(src.data_ptr(), code, list(src.shape),
                                      key[1], op,
                                      float(prescale_factor), float(postscale_factor), src,
                                      out.allocator, process_set_id=ps_id, device=_device(src))
    return _register_reducescatter(core_handle, out.result, key, op)


def _reducescatter_grad(grad, op, process_set, prescale_factor, postscale_factor):
    # Horovod's definition: the gathered gradient, times the set size for
    # Sum, times the scale factors.
    if op == Sum:
        grad *= process_set.size()
    if prescale_factor != 1.0:
        grad *= prescale_factor
    if postscale_factor != 1.0:
        grad *= postscale_factor
    return grad


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter; the gradient is an allgather of the gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.process_set = process_set
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allgather(grad_output, process_set=ctx.process_set)
        return (_reducescatter_grad(grad, ctx.op, ctx.process_set, ctx.prescale_factor,
                                    ctx.postscale_factor),
                None, None, None, None, None)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces `tensor` over the ranks (Average or Sum) and returns this
    rank's block of rows. Differentiable."""
    compressed, ctx = compression.compress(tensor)
    reduced = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                         postscale_factor)
    return compression.decompress(reduced, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducescatters of a list of tensors as one group."""
    ps_id = check_process_set(process_set)
    tensors = list(tensors)
    codes = [_dtype_code(t) for t in tensors]
    _check_bool_average(tensors, op)
    srcs = [t.contiguous() for t in tensors]
    outs = [_Output(s.dtype, s.device) for s in srcs]
    key = _op_name('grouped_reducescatter', name, ps_id)
    core_handle = _core.grouped_reducescatter(
        [s.data_ptr() for s in srcs], codes, [list(s.shape) for s in srcs],
        key[1], op, float(prescale_factor),
        float(postscale_factor), srcs, [o.allocator for o in outs], process_set_id=ps_id,
        device=_device(*srcs))
    return _register_reducescatter(
        core_handle, lambda h: [o.result(h, i) for i, o in enumerate(outs)], key, op)


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter; the gradient is a grouped allgather."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.op = op
        ctx.process_set = process_set
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        return tuple(synchronize(grouped_reducescatter_async(
            tensors, name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allgather(list(grad_output), process_set=ctx.process_set)
        return (None, None, None, None, None,
                *[_reducescatter_grad(g, ctx.op, ctx.process_set, ctx.prescale_factor,
                                      ctx.postscale_factor) for g in grads])


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatters a list of tensors as one group; returns the list of
    results. Differentiable."""
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    reduced = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                                postscale_factor, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


# ---------------------------------------------------------------- barrier, join

def barrier(process_set=global_process_set):
    """Returns once every rank has called barrier()."""
    ps_id = check_process_set(process_set)
    _wait(_core.barrier(process_set_id=ps_id))


def join(device=-1):
    """This rank has no more data: until every rank has joined it contributes
    zeros to the others' allreduces. Returns the rank that joined last."""
    return _wait(_core.join()).join_result()
