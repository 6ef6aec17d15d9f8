"""Process sets (horovod.common.process_sets): static sets given to init(),
sets from mpi4py communicators, and dynamic add/remove. Each set runs its
own negotiation and backend communicator in the runtime, concurrently with
the others."""

from troupe import _core
from troupe.common.exceptions import status_error


class ProcessSet:
    """A group of global ranks, from a list or an mpi4py communicator.
    `process_set_id` is set once the set is registered (init() or
    add_process_set()); 0 is the global set."""

    def __init__(self, ranks_or_comm):
        self.mpi_comm = None
        if hasattr(ranks_or_comm, 'Get_group'):  # an mpi4py communicator
            self.mpi_comm = ranks_or_comm
            ranks_or_comm = _world_ranks(ranks_or_comm)
        self.ranks = sorted(int(r) for r in ranks_or_comm)
        self.process_set_id = None
        # The runtime and membership epoch it was registered in (_stamp()):
        # a reset or a shutdown() dissolves it.
        self._registered_in = None

    def _is_global(self):
        return self.process_set_id == 0

    def size(self):
        """Number of ranks; None before init()."""
        if self._is_global():
            n = _core.size()
            return n if n >= 0 else None
        return len(self.ranks)

    def rank(self):
        """This process's rank within the set; None before init() or when
        not a member."""
        r = _core.rank()
        if r < 0:
            return None
        if self._is_global():
            return r
        return self.ranks.index(r) if r in self.ranks else None

    def included(self):
        """Whether this process belongs to the set (None before init())."""
        r = _core.rank()
        if r < 0:
            return None
        return self._is_global() or r in self.ranks

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and self.ranks == other.ranks and \
            self.process_set_id == other.process_set_id

    def __hash__(self):
        return hash((tuple(self.ranks), self.process_set_id))

    def __repr__(self):
        ranks = list(range(_core.size())) if self._is_global() and _core.size() > 0 \
            else self.ranks
        comm = None if self.mpi_comm is None else repr(self.mpi_comm)
        return 'ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)' % (
            self.process_set_id, ranks, comm)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _world_ranks(comm):
    from mpi4py import MPI
    group = comm.Get_group()
    world = MPI.COMM_WORLD.Get_group()
    return MPI.Group.Translate_ranks(group, list(range(group.Get_size())), world)


def check_process_set(process_set):
    """The id of a registered set, for the runtime; ValueError otherwise."""
    if not isinstance(process_set, ProcessSet):
        raise ValueError('process_set must be a ProcessSet, got %r' % (process_set,))
    if process_set.process_set_id is None:
        raise ValueError('Process set does not exist or has not been registered.')
    if _stale(process_set):
        if process_set._registered_in[0] != _runtimes:
            raise ValueError('Process set %s was registered with a runtime shut down since; '
                             'register it again (init(process_sets=...) or add_process_set).' %
                             (process_set.ranks,))
        raise ValueError('Process set %s was dissolved by the reset to membership epoch %d; '
                         'register it again (add_process_set, e.g. in a reset callback).' %
                         (process_set.ranks, _core.epoch()))
    return process_set.process_set_id


def _stale(process_set):
    return process_set.process_set_id != 0 and process_set._registered_in != _stamp()


# Runtimes started by this process: a runtime's membership epochs count
# from 0 again, so a set is registered in (runtime, epoch).
_runtimes = 0


def _stamp():
    return _runtimes, _core.epoch()


def runtime_started():
    """Before a new runtime registers its sets: every earlier one is gone."""
    global _runtimes
    _runtimes += 1
    _registry.clear()


# The sets this process's runtime registered: sorted ranks -> (id, _stamp()).
# Cleared when a runtime starts; entries of an earlier epoch are dissolved.
_registry = {}
# Called with a set's id once every rank removed it (the id may be given to
# a new set): the torch binding's counters of unnamed ops on it start again.
on_removed = []


def registered(process_set, set_id):
    """Records that `process_set` got id `set_id` in the current epoch."""
    process_set.process_set_id = set_id
    process_set._registered_in = _stamp()
    _registry[tuple(process_set.ranks)] = set_id, process_set._registered_in


def registered_id(ranks):
    """The id of the registered set of `ranks` in this epoch, or None."""
    set_id, registered_in = _registry.get(tuple(ranks), (None, None))
    return set_id if registered_in == _stamp() else None


def _register(process_set):
    code, message, set_id, ranks = _core.add_process_set(process_set.ranks)
    if code:
        raise status_error(code, message)
    process_set.ranks = list(ranks)
    registered(process_set, set_id)
    return process_set


def add_process_set(process_set):
    """Registers a set (a ProcessSet or a list of ranks) on every rank; all
    ranks call it in the same order. Needs init(process_sets="dynamic") or
    HOROVOD_DYNAMIC_PROCESS_SETS=1. A set dissolved by a reset may be
    registered again. Returns the registered ProcessSet."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None and not _stale(process_set):
        raise ValueError('Process set %r is already registered.' % (process_set,))
    return _register(process_set)


def remove_process_set(process_set):
    """Removes a registered set on every rank; collectives pending on it fail.
    Returns True when it was removed."""
    set_id = check_process_set(process_set)
    code, message = _core.remove_process_set(set_id)
    if code:
        raise status_error(code, message)
    _registry.pop(tuple(process_set.ranks), None)
    process_set.process_set_id = None
    for forget in on_removed:
        forget(set_id)
    return True
