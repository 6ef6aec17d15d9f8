#include "troupe/status.hpp"
#include "troupe/types.hpp"

namespace troupe {

size_t element_size(data_type dtype) {
  switch (dtype) {
    case data_type::uint8:
    case data_type::int8:
    case data_type::boolean:
      return 1;
    case data_type::uint16:
    case data_type::int16:
    case data_type::float16:
    case data_type::bfloat16:
      return 2;
    case data_type::int32:
    case data_type::float32:
      return 4;
    case data_type::int64:
    case data_type::float64:
      return 8;
  }
  return 0;
}

const char* to_string(data_type dtype) {
  switch (dtype) {
    case data_type::uint8: return "uint8";
    case data_type::int8: return "int8";
    case data_type::uint16: return "uint16";
    case data_type::int16: return "int16";
    case data_type::int32: return "int32";
    case data_type::int64: return "int64";
    case data_type::float16: return "float16";
    case data_type::float32: return "float32";
    case data_type::float64: return "float64";
    case data_type::boolean: return "bool";
    case data_type::bfloat16: return "bfloat16";
  }
  return "unknown";
}

const char* to_string(reduce_op op) {
  switch (op) {
    case reduce_op::average: return "average";
    case reduce_op::sum: return "sum";
    case reduce_op::adasum: return "adasum";
    case reduce_op::min: return "min";
    case reduce_op::max: return "max";
    case reduce_op::product: return "product";
  }
  return "unknown";
}

const char* to_string(status_code code) {
  switch (code) {
    case status_code::ok: return "ok";
    case status_code::invalid_argument: return "invalid argument";
    case status_code::mismatch: return "mismatch";
    case status_code::peer_lost: return "peer lost";
    case status_code::shut_down: return "shut down";
    case status_code::timeout: return "timeout";
    case status_code::backend: return "backend error";
    case status_code::internal: return "internal error";
    case status_code::reset: return "reset";
    case status_code::removed: return "removed";
  }
  return "unknown";
}

const char* to_string(device_kind kind) {
  switch (kind) {
    case device_kind::cpu: return "CPU";
    case device_kind::cuda: return "CUDA";
  }
  return "unknown";
}

std::string to_string(const tensor_device& device) {
  if (device.kind == device_kind::cpu)
    return to_string(device.kind);
  return std::string(to_string(device.kind)) + " device " + std::to_string(device.ordinal);
}

int64_t num_elements(const shape_t& shape) {
  int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

std::string to_string(const shape_t& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

} // namespace troupe
