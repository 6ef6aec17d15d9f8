#include <numeric>

#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {

// Splits are not negotiated (they would cost size^2 at the coordinator, as
// in Horovod): each rank learns from the senders how many rows come
// (communicator::alltoall_rows).
void run_alltoall(const run_context& ctx, actors::tensor_entry& e) {
  const auto n = static_cast<size_t>(ctx.size);
  const auto& shape = e.input.shape;
  const auto row_bytes = static_cast<int64_t>(
    static_cast<size_t>(num_elements(shape_t(shape.begin() + 1, shape.end()))) *
    element_size(e.input.dtype));
  auto send_rows = e.splits;
  if (send_rows.empty())
    send_rows.assign(n, shape[0] / ctx.size);
  std::vector<int64_t> received;
  // A valid pointer for an empty input too.
  char nothing = 0;
  ctx.comm.alltoall_rows(e.input.data ? e.input.data : &nothing, send_rows,
                         static_cast<size_t>(row_bytes),
                         [&](const std::vector<int64_t>& recv_rows) {
                           received = recv_rows;
                           auto out_shape = shape;
                           out_shape[0] =
                             std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
                           return result_buffer(e, out_shape);
                         });
  e.handle->received_splits = std::move(received);
}

} // namespace troupe::backends
