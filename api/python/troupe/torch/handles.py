"""Plumbing shared by troupe.torch's collectives: reduction and dtype codes,
Horovod's integer handles (poll / synchronize), deterministic names for
unnamed ops, and init / reset / shutdown that reset them."""

import itertools
import warnings

import torch

from troupe import _core
from troupe.common import basics as _basics
from troupe.common import process_sets as _process_sets
from troupe.common.exceptions import HorovodInternalError, status_error


# troupe::reduce_op numbering, which is Horovod's.
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

# troupe::data_type numbering (Horovod's). torch has no uint16 on CPU.
_DTYPE_CODES = {
    torch.uint8: 0,
    torch.int8: 1,
    torch.int16: 3,
    torch.int32: 4,
    torch.int64: 5,
    torch.float16: 6,
    torch.float32: 7,
    torch.float64: 8,
    torch.bool: 9,
    torch.bfloat16: 10,
}

# Horovod handles are ints: int -> (core handle, finish(core handle) -> result).
_handle_map = {}
_handle_ids = itertools.count()
# Unnamed ops are "<op>.noname.<n>" with a counter per (op type, process
# set), so ranks that issue the same ops on a set in the same order agree on
# the names, whatever else they run on sets they alone belong to.
_noname_counters = {}
# Handles whose operations shutdown() dropped before they were synchronized:
# synchronize() raises for them (once), as Horovod's fails after shutdown.
_shut_down_handles = set()
# (process set id, name) -> core handle of this process's collectives, so a
# second one under a name still being processed is refused at the call
# (ValueError), as Horovod's enqueue does; entries go at synchronize().
_named = {}


def _forget_set(process_set_id):
    """A removed set's id may name a new set, of other members: its
    unnamed ops count from 0 again on every rank."""
    for key in [k for k in _noname_counters if k[1] == process_set_id]:
        del _noname_counters[key]


_process_sets.on_removed.append(_forget_set)

DUPLICATE_NAME = ('Requested to allreduce, allgather, or broadcast a tensor with the same '
                  'name as another tensor that is currently being processed. If you want to '
                  'request another tensor, use a different tensor name.')


def init(comm=None, process_sets=None):
    """Starts the runtime (horovod.torch.init). Harmless when initialized."""
    started = not _basics.is_initialized()
    _basics.init(comm, process_sets)
    if started:
        _noname_counters.clear()


def reset():
    """In-place reset (troupe.common.basics.reset). Unnamed ops count from 0
    again, as in a newcomer that joins the new membership."""
    _basics.reset()
    _noname_counters.clear()


def shutdown():
    """Stops the runtime; pending operations fail, and synchronize() of any
    handle not synchronized yet raises HorovodInternalError."""
    _basics.shutdown()
    _shut_down_handles.update(_handle_map)
    _handle_map.clear()
    _named.clear()
    _noname_counters.clear()


def _op_name(prefix, name, process_set_id):
    """The runtime's name of an op, as (process set id, name); ValueError
    when this process still runs one under that name."""
    if name is None:
        n = _noname_counters.get((prefix, process_set_id), 0)
        _noname_counters[prefix, process_set_id] = n + 1
        return process_set_id, '%s.noname.%d' % (prefix, n)
    key = process_set_id, '%s.%s' % (prefix, name)
    running = _named.get(key)
    if running is not None and not running.poll():
        raise ValueError(DUPLICATE_NAME)
    return key


def _dtype_code(tensor):
    if not isinstance(tensor, torch.Tensor):
        raise ValueError('expected a torch.Tensor, got %s' % type(tensor).__name__)
    if tensor.device.type not in ('cpu', 'cuda'):
        raise ValueError('Troupe supports CPU and CUDA tensors; this tensor is on %s.' %
                         tensor.device)
    if tensor.layout != torch.strided:
        raise ValueError('Tensor layout %s is not supported; use a dense tensor.' %
                         tensor.layout)
    code = _DTYPE_CODES.get(tensor.dtype)
    if code is None:
        raise ValueError('Tensor type %s is not supported.' % tensor.type())
    return code


def _device(*tensors):
    """The device argument of a _core call on `tensors`: None for CPU; for
    CUDA, (device index, the cudaEvent_t of an event recorded now on the
    current torch stream, the event), so the GPU backend waits for exactly
    the work queued before the call."""
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError('Tensors of one call must be on one device, not %s.' %
                         ', '.join(sorted(str(d) for d in devices)))
    device = next(iter(devices), torch.device('cpu'))
    if device.type != 'cuda':
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    ready = torch.cuda.Event()
    ready.record(torch.cuda.current_stream(index))
    return index, ready.cuda_event, ready


def _raise_if_rejected(core_handle):
    """Arguments rejected before anything was sent fail at the call, as
    Horovod's enqueue does; so does a call without a runtime, in Horovod's
    words (HorovodInternalError, as its RuntimeError from enqueue)."""
    if core_handle.poll():
        code, message = core_handle.result()
        if code and not _basics.is_initialized():
            raise HorovodInternalError(_basics.NOT_INITIALIZED)
        if code:
            raise status_error(code, message)


def _register(core_handle, finish, key):
    """A Horovod handle for `core_handle` of the op named `key` (from
    _op_name)."""
    _raise_if_rejected(core_handle)
    handle = next(_handle_ids)
    _handle_map[handle] = (core_handle, finish, key)
    _named[key] = core_handle
    return handle


def _empty_like(src):
    """An uninitialised contiguous tensor of `src`'s shape, dtype and device,
    for an output. From _core.huge_result_bytes on, a CPU one is memory the
    runtime allocates as it does a large CPU result, in huge pages: torch's
    own comes from the kernel afresh on every call, a page fault per 4 KiB
    (64 MiB allocated and filled: 24.5 against 8.7 ms here; an allreduce
    into a new 64 MiB tensor on 2 ranks 40.1 -> 22.7-24.8 ms). Below that,
    torch's measured no worse."""
    nbytes = src.numel() * src.element_size()
    if src.device.type != 'cpu' or nbytes < _core.huge_result_bytes:
        return torch.empty_like(src, memory_format=torch.contiguous_format)
    return torch.frombuffer(_core.cpu_memory(nbytes), dtype=src.dtype).view(src.shape)


class _Output:
    """A result whose shape is known only after negotiation. On the CPU the
    runtime allocates it on its backend thread without the GIL, and
    result() wraps that memory as a tensor without copying; on a GPU the
    runtime calls this object once, from its backend thread with the GIL
    held, for a tensor of the framework's allocator to write into."""

    def __init__(self, dtype, device=None):
        self.dtype = dtype
        self.device = device
        self.tensor = None

    @property
    def allocator(self):
        """What the core's call takes: None for the runtime's own memory."""
        return None if self.device is None or self.device.type == 'cpu' else self

    def __call__(self, shape):
        self.tensor = torch.empty(shape, dtype=self.dtype, device=self.device)
        return self.tensor.data_ptr()

    def result(self, core_handle, member=0):
        """The result tensor, once `core_handle` completed."""
        if self.tensor is None:
            memory, shape = core_handle.result_memory(member)
            self.tensor = (torch.empty(shape, dtype=self.dtype) if memory is None
                           else torch.frombuffer(memory, dtype=self.dtype).view(shape))
        return self.tensor


def _copy_back(targets, sources):
    # Without autograd: a target may be a leaf that requires grad (an
    # nn.Parameter not contiguous, as a channels_last model's), which torch
    # refuses to change in place otherwise; the result is data, not a step
    # of the graph.
    with torch.no_grad():
        for target, source in zip(targets, sources):
            if source is not target:
                target.copy_(source)


def _check_bool_average(tensors, op):
    """A bool tensor cannot be averaged: refused at the call, naming the op
    (Horovod refuses bool in every reduction)."""
    if op == Average and any(t.dtype == torch.bool for t in tensors):
        raise ValueError('Cannot average a bool tensor (op=Average, the default op): bool '
                         'supports sum, min, max and product without prescale/postscale '
                         'factors; pass op=hvd.Sum, hvd.Min, hvd.Max or hvd.Product.')


def _resolve_op(op, average):
    if op is not None and average is not None:
        raise ValueError('The op parameter supersedes average. Please provide only one of them.')
    if average is not None:
        warnings.warn('Parameter `average` has been replaced with `op` and will be removed '
                      'in v1.0', DeprecationWarning)
        return Average if average else Sum
    return Average if op is None else op


def poll(handle):
    """True once the operation behind `handle` has finished. Never blocks."""
    entry = _handle_map.get(handle)
    if entry is None:
        raise ValueError('Handle %s was not created or has been cleared.' % handle)
    return entry[0].poll()


def _raise_if_shut_down(handle):
    if handle in _shut_down_handles:
        _shut_down_handles.discard(handle)
        raise HorovodInternalError(
            'Horovod has been shut down (hvd.shutdown()) before handle %s was synchronized; '
            'its operation\'s result is gone.' % handle)


def synchronize(handle):
    """Waits for `handle` and returns its result; raises HorovodInternalError
    if the collective failed or the runtime was shut down before (ValueError
    for rejected arguments). Unknown handles, and handles already
    synchronized (by another thread too), give None."""
    entry = _handle_map.get(handle)
    if entry is None:
        _raise_if_shut_down(handle)
        return None
    core_handle, finish, key = entry
    # Ctrl-C raises KeyboardInterrupt here; the collective goes on, and the
    # handle stays (with the memory the runtime uses) for a later call. In a
    # child fork()ed after init(), one pending at the fork fails at once
    # (shut_down: HorovodInternalError).
    core_handle.wait()
    if _handle_map.pop(handle, None) is None:
        # Another thread synchronized it meanwhile, or shutdown() dropped it.
        _raise_if_shut_down(handle)
        return None
    if _named.get(key) is core_handle:
        del _named[key]
    code, message = core_handle.result()
    if code:
        raise status_error(code, message)
    return finish(core_handle)


def _wait(core_handle):
    _raise_if_rejected(core_handle)
    core_handle.wait()
    code, message = core_handle.result()
    if code:
        raise status_error(code, message)
    return core_handle
