#include "metrics/bus_bytes.hpp"

#include <cmath>

namespace troupe::metrics {

uint64_t bus_bytes(v1::OpType op, uint64_t bytes, int set_size) {
  const double n = set_size;
  double factor = 0;
  switch (op) {
    case v1::OP_TYPE_ALLREDUCE: factor = 2 * (n - 1) / n; break;
    case v1::OP_TYPE_ALLGATHER:
    case v1::OP_TYPE_REDUCESCATTER:
    case v1::OP_TYPE_ALLTOALL: factor = (n - 1) / n; break;
    case v1::OP_TYPE_BROADCAST: factor = 1; break;
    default: factor = 0;
  }
  return static_cast<uint64_t>(std::llround(static_cast<double>(bytes) * factor));
}

} // namespace troupe::metrics
