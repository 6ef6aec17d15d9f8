"""troupe.torch: a drop-in replacement for horovod.torch.

    import troupe.torch as hvd
"""

from troupe.common.basics import (
    is_initialized, epoch, rank, size, local_rank, local_size, cross_rank, cross_size,
    is_homogeneous, mpi_threads_supported, mpi_enabled, mpi_built, gloo_enabled, gloo_built,
    nccl_built, ddl_built, ccl_built, cuda_built, rocm_built, start_timeline, stop_timeline)
from troupe.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from troupe.common.process_sets import (
    ProcessSet, global_process_set, add_process_set, remove_process_set)
from troupe.torch.compression import Compression
from troupe.torch.mpi_ops import (
    init, reset, shutdown,
    Average, Sum, Adasum, Min, Max, Product,
    allreduce, allreduce_async, allreduce_, allreduce_async_,
    grouped_allreduce, grouped_allreduce_async, grouped_allreduce_, grouped_allreduce_async_,
    sparse_allreduce_async,
    allgather, allgather_async, grouped_allgather, grouped_allgather_async,
    broadcast, broadcast_async, broadcast_, broadcast_async_,
    alltoall, alltoall_async,
    reducescatter, reducescatter_async, grouped_reducescatter, grouped_reducescatter_async,
    join, barrier, poll, synchronize)
from troupe.torch.functions import (
    allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters)
from troupe.torch.optimizer import DistributedOptimizer
from troupe.torch.sync_batch_norm import SyncBatchNorm
from troupe.torch import elastic
