"""Starting and stopping the runtime, identity, and what this build has
(horovod.common.basics, without the framework parts)."""

import atexit
import os

from troupe import _core
from troupe.common.exceptions import status_error

NOT_INITIALIZED = 'Horovod has not been initialized; use hvd.init().'

_atexit_registered = False


def init(comm=None, process_sets=None):
    """Starts this rank's runtime (identity from troupe-run or mpirun; a
    single rank without either). Harmless when already initialized; works
    again after shutdown()."""
    global _atexit_registered
    from troupe.common import process_sets as ps
    if comm is not None and not hasattr(comm, 'Get_group'):
        raise ValueError('init(comm=...) takes an mpi4py communicator')
    if comm is not None and _world_size() != comm.Get_size():
        raise ValueError('init(comm=...): Troupe runs on every rank of the job; the '
                         'communicator must span MPI_COMM_WORLD (use process sets for '
                         'subsets)')
    if process_sets == 'dynamic':
        # The runtime reads its knobs at init.
        os.environ['TROUPE_DYNAMIC_PROCESS_SETS'] = '1'
        process_sets = None
    static = list(process_sets or [])
    for s in static:
        if not isinstance(s, ps.ProcessSet):
            raise ValueError('process_sets must be ProcessSet objects or "dynamic"')
    if is_initialized():
        _adopt_registered(static)
        return
    registered = _distinct_sets(static) if any(s.mpi_comm is not None for s in static) \
        else [s.ranks for s in static]
    ps.runtime_started()
    _check(_core.init_with_process_sets(registered))
    if os.environ.get('TROUPE_ELASTIC') == '1':
        # The plan joined may be newer than the one troupe-run started us for.
        _export_identity()
    for s in static:
        ps.registered(s, registered.index(s.ranks) + 1)
    if not _atexit_registered:
        # Stop the runtime (and tell the peers) before the interpreter
        # tears the extension module down.
        atexit.register(_core.shutdown)
        _atexit_registered = True


def _adopt_registered(static):
    """init() with process sets while the runtime runs (which registers
    nothing): sets of the ranks of registered ones get their ids, as
    Horovod's second init() looks them up; a ValueError names the others,
    which would otherwise stay unusable without a word."""
    from troupe.common import process_sets as ps
    found = [(s, ps.registered_id(s.ranks)) for s in static if s.process_set_id != 0]
    missing = [s for s, set_id in found if set_id is None]
    if missing:
        raise ValueError(
            'init(process_sets=...): Horovod is already initialized, and process set(s) %s '
            'are not registered; pass every static set to the first init(), or use '
            'init(process_sets="dynamic") and add_process_set().' %
            ', '.join(str(s.ranks) for s in missing))
    for s, set_id in found:
        ps.registered(s, set_id)


def _distinct_sets(static):
    """Sets from communicators differ by rank (Horovod's example gives each
    rank its half of a split): as Horovod, register every distinct set of
    any rank, in rank order, so each rank's object gets its own set's id."""
    from mpi4py import MPI
    registered = []
    for sets in MPI.COMM_WORLD.allgather([s.ranks for s in static]):
        registered += [ranks for ranks in sets if ranks not in registered]
    return registered


def _world_size():
    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_size()


def shutdown():
    _core.shutdown()


def is_initialized():
    return _core.is_initialized()


def reset():
    """Troupe's in-place reset, what elastic training builds on: pending
    collectives fail with HorovodInternalError, and the job moves to its
    next membership epoch with the processes that call reset() (the
    previous ranks neither lost nor shut down, renumbered in their previous
    order). Process sets other than the global one are gone afterwards.
    Needs troupe-run's store (not plain mpirun). Afterwards the identity
    variables (HOROVOD_*, TROUPE_*, torch's RANK, WORLD_SIZE, LOCAL_RANK,
    LOCAL_WORLD_SIZE) describe the new membership.

    In an elastic job (troupe-run --min-np / --host-discovery-script) the
    membership is troupe-run's plan: ranks may join or leave, and a process
    the plan has no place for gets WorkerRemoved (a SystemExit(0))."""
    _check(_core.reset())
    _export_identity()


def _export_identity():
    fields = dict(RANK=_core.rank(), SIZE=_core.size(), LOCAL_RANK=_core.local_rank(),
                  LOCAL_SIZE=_core.local_size(), CROSS_RANK=_core.cross_rank(),
                  CROSS_SIZE=_core.cross_size())
    for name, value in fields.items():
        os.environ['TROUPE_' + name] = os.environ['HOROVOD_' + name] = str(value)
    os.environ['RANK'] = str(fields['RANK'])
    os.environ['WORLD_SIZE'] = str(fields['SIZE'])
    os.environ['LOCAL_RANK'] = str(fields['LOCAL_RANK'])
    os.environ['LOCAL_WORLD_SIZE'] = str(fields['LOCAL_SIZE'])
    os.environ['GROUP_RANK'] = str(fields['CROSS_RANK'])


def epoch():
    """The membership epoch: 0 after init(), one more per reset()."""
    return _core.epoch()


def _identity(value):
    if value < 0:
        raise ValueError(NOT_INITIALIZED)
    return value


def rank():
    return _identity(_core.rank())


def size():
    return _identity(_core.size())


def local_rank():
    return _identity(_core.local_rank())


def local_size():
    return _identity(_core.local_size())


def cross_rank():
    return _identity(_core.cross_rank())


def cross_size():
    return _identity(_core.cross_size())


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return local_size() * cross_size() == size()


def mpi_built():
    return 'mpi' in _core.built_cpu_backends()


def gloo_built():
    return 'gloo' in _core.built_cpu_backends()


def mpi_enabled():
    """True when this job's collectives run on MPI (troupe-run --mpi,
    mpirun), and, as Horovod built with MPI reports it, in a single process
    started alone, which needs no backend and does not initialise MPI. The
    runtime's answer: the backend registry decides (backends/registry.cpp)."""
    return _core.mpi_enabled()


def gloo_enabled():
    """True when this job's collectives run on Gloo (troupe-run without
    --mpi, or TROUPE_CPU_OPERATIONS=gloo; a single rank needs none)."""
    return _core.gloo_enabled()


def mpi_threads_supported():
    """Whether MPI runs with MPI_THREAD_MULTIPLE, as Horovod asks MPI: what
    Troupe asks for whenever it uses MPI, unless TROUPE_MPI_THREADS_DISABLE=1
    (HOROVOD_MPI_THREADS_DISABLE) asked for MPI_THREAD_SERIALIZED. A process
    started alone does not start MPI; it gets what Troupe would ask for."""
    supported = _core.mpi_threads_supported()
    if supported < 0:
        raise ValueError("Horovod MPI is not enabled; Please make sure it's installed and enabled.")
    return bool(supported)


def nccl_built():
    """The NCCL version code (2.28.9: 22809) this build's NCCL backend was
    compiled against; 0: not built."""
    return _core.nccl_version()


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    """Whether this build takes CUDA tensors (with NCCL, or staged through
    host memory to the CPU backend)."""
    return _core.cuda_built()


def rocm_built():
    return False


def _check(result):
    code, message = result
    if code:
        raise status_error(code, message)


def start_timeline(file_path, mark_cycles=False):
    """Starts writing this rank's Chrome trace to `file_path` ("t.json" ->
    "t.<rank>.json"), with a marker per cycle if `mark_cycles`. Needs
    TROUPE_TIMELINE (or HOROVOD_TIMELINE) set before init(), e.g. to DYNAMIC."""
    if not is_initialized():
        raise ValueError(NOT_INITIALIZED)
    _check(_core.start_timeline(str(file_path), bool(mark_cycles)))


def stop_timeline():
    """Stops writing the timeline; the file stays complete JSON."""
    if not is_initialized():
        raise ValueError(NOT_INITIALIZED)
    _check(_core.stop_timeline())
