#include "request_parameters.hpp"

#include <algorithm>

namespace troupe {

bool same_collective(const v1::Request& a, const v1::Request& b) {
  return a.op() == b.op() && a.dtype() == b.dtype() && a.tensor_name() == b.tensor_name() &&
         a.root_rank() == b.root_rank() && a.reduce_op() == b.reduce_op() &&
         a.prescale_factor() == b.prescale_factor() &&
         a.postscale_factor() == b.postscale_factor() && a.group_name() == b.group_name() &&
         a.group_size() == b.group_size() && a.device_kind() == b.device_kind() &&
         a.deadline_ms() == b.deadline_ms() &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end());
}

bool same_parameters(const v1::Request& a, const v1::Request& b) {
  return same_collective(a, b) && a.device_ordinal() == b.device_ordinal();
}

} // namespace troupe
