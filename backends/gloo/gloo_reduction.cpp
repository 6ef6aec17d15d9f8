#include "backends/gloo/gloo_reduction.hpp"

#include <string>
#include <type_traits>

#include <gloo/math.h>

#include "backends/cpu/arith.hpp"

namespace troupe::backends {

namespace {

template <class T>
element_reduction reduction_for(reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::average:  // summed here, divided by the caller
      return &gloo::sum<T>;
    case reduce_op::product:
      return &gloo::product<T>;
    case reduce_op::min:
      return &gloo::min<T>;
    case reduce_op::max:
      return &gloo::max<T>;
    case reduce_op::adasum:
      break;
  }
  throw backend_error(std::string("gloo: reduction '") + to_string(op) +
                      "' is not supported");
}

} // namespace

element_reduction reduction_of(data_type dtype, reduce_op op) {
  if (is_half(dtype))
    return half_reduction_of(dtype, op);
  element_reduction fn = nullptr;
  with_element_type(dtype, [&](auto* type_tag) {
    using T = std::remove_pointer_t<decltype(type_tag)>;
    fn = reduction_for<T>(dtype == data_type::boolean && op == reduce_op::sum ? reduce_op::max
                                                                               : op);
  });
  return fn;
}

} // namespace troupe::backends
