#include "backends/cuda/kernels.hpp"

#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/backend.hpp"

namespace troupe::backends::cuda {

namespace {

constexpr int threads = 256;
constexpr int max_blocks = 4096;

int blocks_for(size_t items) {
  const size_t blocks = (items + threads - 1) / threads;
  return static_cast<int>(blocks < max_blocks ? (blocks > 0 ? blocks : 1) : max_blocks);
}

void check_launch(const char* what) {
  const auto result = cudaGetLastError();
  if (result != cudaSuccess)
    throw backend_error(std::string(what) + ": " + cudaGetErrorString(result));
}

template <class T>
__global__ void scale_integers(T* data, size_t count, int divisor, double factor) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    T v = divisor != 1 ? static_cast<T>(data[i] / static_cast<T>(divisor)) : data[i];
    if (factor != 1.0)
      v = static_cast<T>(static_cast<double>(v) * factor);  // truncates toward zero
    data[i] = v;
  }
}

template <class T, class Compute>
__global__ void scale_floats(T* data, size_t count, Compute factor) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x)
    data[i] = static_cast<T>(static_cast<Compute>(data[i]) * factor);
}

template <class T>
void launch_integers(void* data, size_t count, int divisor, double factor, cudaStream_t s) {
  scale_integers<<<blocks_for(count), threads, 0, s>>>(static_cast<T*>(data), count, divisor,
                                                       factor);
}

template <class T, class Compute>
void launch_floats(void* data, size_t count, double factor, cudaStream_t s) {
  scale_floats<<<blocks_for(count), threads, 0, s>>>(static_cast<T*>(data), count,
                                                     static_cast<Compute>(factor));
}

// Up to 64 copies travel in the launch's parameters (1.5 KiB, under the
// 4 KiB every CUDA version takes), so no descriptor goes to the device first.
constexpr int batch = 64;

struct copy_batch {
  const void* from[batch];
  void* to[batch];
  size_t bytes[batch];
};

// One block per copy; 16-byte words when the copy allows, else bytes.
__global__ void copy_kernel(copy_batch b) {
  const int k = blockIdx.x;
  const auto* from = static_cast<const char*>(b.from[k]);
  auto* to = static_cast<char*>(b.to[k]);
  const size_t bytes = b.bytes[k];
  const bool aligned = ((reinterpret_cast<uintptr_t>(from) | reinterpret_cast<uintptr_t>(to) |
                         bytes) & 15) == 0;
  if (aligned) {
    const auto* f = reinterpret_cast<const uint4*>(from);
    auto* t = reinterpret_cast<uint4*>(to);
    for (size_t i = threadIdx.x; i < bytes / 16; i += blockDim.x)
      t[i] = f[i];
  } else {
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x)
      to[i] = from[i];
  }
}

} // namespace

void scale(void* data, size_t count, data_type dtype, int divisor, double factor,
           cudaStream_t s) {
  if ((divisor == 1 && factor == 1.0) || count == 0)
    return;
  switch (dtype) {
    case data_type::uint8: launch_integers<uint8_t>(data, count, divisor, factor, s); break;
    case data_type::int8: launch_integers<int8_t>(data, count, divisor, factor, s); break;
    case data_type::uint16: launch_integers<uint16_t>(data, count, divisor, factor, s); break;
    case data_type::int16: launch_integers<int16_t>(data, count, divisor, factor, s); break;
    case data_type::int32: launch_integers<int32_t>(data, count, divisor, factor, s); break;
    case data_type::int64: launch_integers<int64_t>(data, count, divisor, factor, s); break;
    case data_type::float16:
      launch_floats<__half, float>(data, count, factor / divisor, s);
      break;
    case data_type::bfloat16:
      launch_floats<__nv_bfloat16, float>(data, count, factor / divisor, s);
      break;
    case data_type::float32: launch_floats<float, float>(data, count, factor / divisor, s); break;
    case data_type::float64:
      launch_floats<double, double>(data, count, factor / divisor, s);
      break;
    case data_type::boolean:
      throw backend_error("bool tensors cannot be scaled or averaged");
  }
  check_launch("scaling kernel");
}

void batched_copy(const std::vector<copy_span>& copies, cudaStream_t s) {
  copy_batch b{};
  int n = 0;
  const auto launch = [&] {
    copy_kernel<<<n, threads * 2, 0, s>>>(b);
    check_launch("batched copy kernel");
    n = 0;
  };
  for (const auto& c : copies) {
    if (c.bytes == 0)
      continue;
    b.from[n] = c.from;
    b.to[n] = c.to;
    b.bytes[n] = c.bytes;
    if (++n == batch)
      launch();
  }
  if (n > 0)
    launch();
}

} // namespace troupe::backends::cuda
