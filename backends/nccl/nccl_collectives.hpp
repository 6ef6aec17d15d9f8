#pragma once

// One function per collective on CUDA tensors: each enqueues its copies,
// scaling kernels and NCCL calls on the backend's stream, and throws
// backend_error. Include only from the NCCL backend's .cpp files.

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "actors/tensor_entry.hpp"
#include "backends/cuda/cuda_runtime.hpp"
#include "backends/host_layout.hpp"
#include "backends/nccl/nccl_comm.hpp"

namespace troupe::backends {

/// The two levels of a hierarchical collective on one device: the set's
/// ranks on this host, and the ranks of this local index on every host.
struct nccl_hierarchy {
  const host_layout& layout;  // has_two_levels
  nccl_comm& local;           // rank layout.member of layout.members
  nccl_comm& cross;           // rank layout.host of layout.hosts
  bool allreduce;
  bool allgather;
};

/// Two timed CUDA events around a stretch of a work's stream.
struct timed_span {
  cuda::event begin{cuda::event::timing::on};
  cuda::event end{cuda::event::timing::on};
  bool recorded = false;
};

/// The copies into and out of the fusion buffer, timed on the GPU: the
/// timeline's MEMCPY_IN_FUSION_BUFFER / MEMCPY_OUT_FUSION_BUFFER are the
/// GPU's times (the host only enqueues the copies). Made only while a
/// timeline is written.
struct fusion_copy_timing {
  timed_span in;
  timed_span out;
};

/// What a collective runs with on one CUDA device.
struct nccl_run_context {
  nccl_comm& comm;
  cudaStream_t stream;
  int rank;
  int size;
  cuda::growing_buffer& fusion;  // device memory, only grows
  cuda::growing_buffer& host;    // pinned host memory for alltoall's row counts
  std::chrono::milliseconds timeout;
  const nccl_hierarchy* hierarchy;  // null: flat collectives only
  fusion_copy_timing* copy_timing;  // null: no timeline
};

/// Allreduce of one or more (fused) tensors; a joined rank's stand-in
/// (host zeros) contributes zeros from the fusion buffer. Hierarchical
/// (ctx.hierarchy->allreduce): reduce-scatter on the host, allreduce of
/// this rank's share across hosts, allgather on the host; a short tail
/// (split_for_hierarchy) through the flat communicator.
void nccl_allreduce(const nccl_run_context& ctx, const v1::Response& resp,
                    const std::vector<actors::tensor_entry_ptr>& entries);
/// Allgather of one or more (fused) tensors, first dimensions as negotiated.
/// Hierarchical (ctx.hierarchy->allgather) for one tensor of equal first
/// dimensions: across hosts, then on the host into the fusion buffer, then
/// one batched copy into rank order.
void nccl_allgather(const nccl_run_context& ctx, const v1::Response& resp,
                    const std::vector<actors::tensor_entry_ptr>& entries);
void nccl_broadcast(const nccl_run_context& ctx, const v1::Response& resp,
                    actors::tensor_entry& e);
/// Splits first go through NCCL; the host waits for them (the output's
/// size depends on them), bounded by ctx.timeout.
void nccl_alltoall(const nccl_run_context& ctx, actors::tensor_entry& e);
void nccl_reducescatter(const nccl_run_context& ctx, const v1::Response& resp,
                        actors::tensor_entry& e);

} // namespace troupe::backends
