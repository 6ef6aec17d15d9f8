#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace troupe {

/// Element types. Numbering matches Horovod's (and troupe.v1.DataType).
enum class data_type : int32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  int32 = 4,
  int64 = 5,
  float16 = 6,
  float32 = 7,
  float64 = 8,
  boolean = 9,
  bfloat16 = 10,
};

/// Reductions. Numbering matches Horovod's (and troupe.v1.ReduceOp).
enum class reduce_op : int32_t {
  average = 0,
  sum = 1,
  adasum = 2,
  min = 3,
  max = 4,
  product = 5,
};

/// Bytes per element.
size_t element_size(data_type dtype);

/// "float32", "int64", ... as Horovod prints them.
const char* to_string(data_type dtype);
const char* to_string(reduce_op op);

using shape_t = std::vector<int64_t>;

/// Product of the dimensions (1 for a scalar).
int64_t num_elements(const shape_t& shape);

/// "[2, 3]".
std::string to_string(const shape_t& shape);

/// Where a tensor's memory lives. Numbering matches troupe.v1.DeviceKind.
enum class device_kind : int32_t {
  cpu = 0,
  cuda = 1,
};

/// A tensor's device. For CUDA, the producer's stream and/or an event
/// recorded once the data is ready (cudaStream_t / cudaEvent_t, kept opaque
/// so this header needs no CUDA): a GPU backend orders its work after them.
/// Null for both means the data is ready when the collective is submitted.
struct tensor_device {
  device_kind kind = device_kind::cpu;
  int32_t ordinal = 0;  // CUDA device number; 0 on CPU
  void* stream = nullptr;
  void* ready_event = nullptr;

  static tensor_device cpu() {
    return {};
  }
  static tensor_device cuda(int32_t ordinal, void* stream = nullptr,
                            void* ready_event = nullptr) {
    return {device_kind::cuda, ordinal, stream, ready_event};
  }
  /// Same memory space (kind and ordinal; streams may differ).
  bool same_memory(const tensor_device& other) const {
    return kind == other.kind && ordinal == other.ordinal;
  }
};

/// "CPU", "CUDA".
const char* to_string(device_kind kind);
/// "CPU", "CUDA device 1".
std::string to_string(const tensor_device& device);

/// A view of caller-owned memory: the runtime never owns or frees it, and the
/// caller keeps it alive until the collective's handle has completed.
/// `tensor{data, dtype, shape}` is a CPU tensor.
struct tensor {
  void* data = nullptr;
  data_type dtype = data_type::float32;
  shape_t shape;
  tensor_device device;

  // A constructor rather than aggregate initialisation, so that the
  // three-field form stays free of missing-initializer warnings.
  tensor() = default;
  tensor(void* memory, data_type type, shape_t dims, tensor_device on = {})
    : data(memory), dtype(type), shape(std::move(dims)), device(on) {
  }

  size_t size_bytes() const {
    return static_cast<size_t>(num_elements(shape)) * element_size(dtype);
  }
};

/// Memory for a result whose size is known only after negotiation
/// (allgather, alltoall, reducescatter). The runtime calls it once per
/// tensor, from a backend thread, with the result's shape, before it writes
/// the result; it returns room for num_elements(shape) elements of the
/// input's dtype on the input's device (may be null for an empty shape).
/// The memory is the caller's, like an input's. Throwing fails the
/// collective on this rank with the exception's message; the other ranks
/// may then wait for this one in the backend until its timeout.
using output_allocator = std::function<void*(const shape_t& shape)>;

} // namespace troupe
