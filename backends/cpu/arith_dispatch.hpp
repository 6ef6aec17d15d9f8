#pragma once

// Template definition of with_element_type (see arith.hpp).

#include <string>

#include "backends/communicator.hpp"

namespace troupe::backends {

template <class F>
void with_element_type(data_type dtype, F&& f) {
  switch (dtype) {
    case data_type::uint8:
    case data_type::boolean: return f(static_cast<uint8_t*>(nullptr));
    case data_type::int8: return f(static_cast<int8_t*>(nullptr));
    case data_type::uint16: return f(static_cast<uint16_t*>(nullptr));
    case data_type::int16: return f(static_cast<int16_t*>(nullptr));
    case data_type::int32: return f(static_cast<int32_t*>(nullptr));
    case data_type::int64: return f(static_cast<int64_t*>(nullptr));
    case data_type::float32: return f(static_cast<float*>(nullptr));
    case data_type::float64: return f(static_cast<double*>(nullptr));
    case data_type::float16:
    case data_type::bfloat16: break;
  }
  throw backend_error(std::string("no element type for ") + to_string(dtype));
}

} // namespace troupe::backends
