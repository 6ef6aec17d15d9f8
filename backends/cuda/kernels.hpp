#pragma once

// The GPU backends' kernels (kernels.cu, compiled by nvcc), each one launch
// on the caller's stream of the current device.

#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>

#include "troupe/types.hpp"

namespace troupe::backends::cuda {

/// data[i] = data[i] / divisor * factor, as the CPU backend scales
/// (backends/cpu/arith.hpp): integers divide exactly and then round the
/// product toward zero; floating types multiply by factor / divisor, 16-bit
/// floats in float32, rounded once. Nothing is launched for 1 and 1.
void scale(void* data, size_t count, data_type dtype, int divisor, double factor,
           cudaStream_t stream);

/// One copy of a batch: `bytes` from `from` to `to` (device memory).
struct copy_span {
  const void* from;
  void* to;
  size_t bytes;
};

/// Every copy of `copies` (Horovod's batched D2D copy into and out of the
/// fusion buffer): one kernel launch per 64 copies instead of a memcpy each.
void batched_copy(const std::vector<copy_span>& copies, cudaStream_t stream);

} // namespace troupe::backends::cuda
