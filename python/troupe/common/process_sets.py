"""Process sets. Only the global set exists so far: the type is here so
that Horovod signatures (`process_set=global_process_set`) work."""

from troupe import _core


class ProcessSet:
    """A subset of the ranks. `ranks` is sorted; `process_set_id` is 0 for the
    global set."""

    def __init__(self, ranks_or_comm):
        if not isinstance(ranks_or_comm, (list, tuple, range)):
            raise NotImplementedError('process sets from an MPI communicator are not supported')
        self.ranks = sorted(ranks_or_comm)
        self.process_set_id = None
        self.mpi_comm = None

    def _is_global(self):
        return self.process_set_id == 0

    def size(self):
        """Number of ranks; None before init()."""
        if self._is_global():
            n = _core.size()
            return n if n >= 0 else None
        return len(self.ranks)

    def rank(self):
        """This process's rank within the set; None before init()."""
        r = _core.rank()
        if r < 0:
            return None
        if self._is_global():
            return r
        return self.ranks.index(r) if r in self.ranks else None

    def included(self):
        """Whether this process belongs to the set (None before init())."""
        if self._is_global():
            return True
        r = _core.rank()
        return None if r < 0 else r in self.ranks

    def __repr__(self):
        return 'ProcessSet(process_set_id=%s, ranks=%s)' % (self.process_set_id, self.ranks)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def check_process_set(process_set):
    """Collectives run on the global set only, for now."""
    if process_set is not global_process_set and getattr(process_set, 'process_set_id', None) != 0:
        raise NotImplementedError(
            'collectives on process sets other than global_process_set are not supported yet')


def add_process_set(process_set):
    raise NotImplementedError('add_process_set() is not supported yet: only the global '
                              'process set exists')


def remove_process_set(process_set):
    raise NotImplementedError('remove_process_set() is not supported yet: only the global '
                              'process set exists')
