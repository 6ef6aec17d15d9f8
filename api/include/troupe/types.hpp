#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
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

/// A view of caller-owned memory: the runtime never owns or frees it, and the
/// caller keeps it alive until the collective's handle has completed.
struct tensor {
  void* data = nullptr;
  data_type dtype = data_type::float32;
  shape_t shape;

  size_t size_bytes() const {
    return static_cast<size_t>(num_elements(shape)) * element_size(dtype);
  }
};

} // namespace troupe
