#pragma once

// One function per collective on CUDA tensors: each enqueues its copies,
// scaling kernels and NCCL calls on the backend's stream, and throws
// backend_error. Include only from the NCCL backend's .cpp files.

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "actors/tensor_entry.hpp"
#include "backends/cuda/cuda_runtime.hpp"
#include "backends/nccl/nccl_comm.hpp"

namespace troupe::backends {

/// What a collective runs with on one CUDA device.
struct nccl_run_context {
  nccl_comm& comm;
  cudaStream_t stream;
  int rank;
  int size;
  cuda::growing_buffer& fusion;  // device memory, only grows
  cuda::growing_buffer& host;    // pinned host memory for alltoall's row counts
  std::chrono::milliseconds timeout;
};

/// Allreduce of one or more (fused) tensors; a joined rank's stand-in
/// (host zeros) contributes zeros from the fusion buffer.
void nccl_allreduce(const nccl_run_context& ctx, const v1::Response& resp,
                    const std::vector<actors::tensor_entry_ptr>& entries);
/// Allgather of one or more (fused) tensors, first dimensions as negotiated.
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
