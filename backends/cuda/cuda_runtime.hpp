#pragma once

// The CUDA runtime as the GPU paths use it: errors as backend_error, and
// owners for the handles and memory they keep. Include only from the GPU
// backends' .cpp files.

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "backends/backend.hpp"
#include "troupe/types.hpp"

namespace troupe::backends::cuda {

/// Throws backend_error "<what>: <CUDA's text>" unless `result` is success.
void check(cudaError_t result, const char* what);

/// Why this process cannot run CUDA work ("no CUDA device is visible ...:
/// <CUDA's text>"), or "" when it sees at least one device.
std::string device_problem();

/// Makes `ordinal` the calling thread's current device for its lifetime,
/// then restores the previous one.
class device_guard {
public:
  explicit device_guard(int ordinal);
  ~device_guard();
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

private:
  int previous_ = 0;
};

/// A non-blocking stream (no implicit order with the legacy default stream).
class stream {
public:
  stream();
  ~stream();
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  cudaStream_t get() const {
    return stream_;
  }

private:
  cudaStream_t stream_ = nullptr;
};

/// An event, without timing (the cheapest kind to record and query) unless
/// asked for.
class event {
public:
  enum class timing { off, on };
  explicit event(timing t = timing::off);
  ~event();
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  cudaEvent_t get() const {
    return event_;
  }
  void record(cudaStream_t on);
  /// true once the work recorded before it has finished; throws
  /// backend_error when that work failed.
  bool done() const;

private:
  cudaEvent_t event_ = nullptr;
};

/// Microseconds the GPU took from `from` to `to`, two timed events whose
/// work has completed (cudaEventElapsedTime, about 0.5 us resolution).
int64_t elapsed_us(const event& from, const event& to);

/// The CUDA device of a work's tensors, or `fallback` when it has none (a
/// joined rank's zeros are host memory). Throws backend_error when the
/// coordinator fused tensors of two devices of this rank.
int work_device(const actors::collective_work& work, int fallback);

/// Makes `on` wait (on the device, the host goes on) for the data of a
/// tensor: its ready event, else everything its producer's stream has
/// queued so far (recorded into `scratch`). A tensor with neither was ready
/// at submission.
void wait_for_producer(const tensor_device& producer, cudaStream_t on, event& scratch);

/// Memory that only grows, so steady-state steps allocate nothing: device
/// memory of the current device, allocated and freed in the order of one
/// stream (cudaMallocAsync: growing never synchronises the device), or
/// pinned host memory (for copies that run asynchronously at full speed).
class growing_buffer {
public:
  enum class where { device, pinned_host };
  /// `order`: the stream whose work uses device memory (ignored for host).
  growing_buffer(where w, cudaStream_t order) : where_(w), order_(order) {
  }
  ~growing_buffer();
  growing_buffer(const growing_buffer&) = delete;
  growing_buffer& operator=(const growing_buffer&) = delete;

  /// At least `bytes` (the old contents are not kept when it grows; device
  /// memory is freed once the work queued on the stream before has run).
  char* at_least(size_t bytes);

private:
  void release();

  where where_;
  cudaStream_t order_;
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

} // namespace troupe::backends::cuda
