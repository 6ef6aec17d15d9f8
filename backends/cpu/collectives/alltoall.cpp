#include <numeric>

#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {

// Splits are not negotiated (they would cost size^2 at the coordinator, as
// in Horovod): each rank first learns how many rows every peer sends it.
void run_alltoall(const run_context& ctx, actors::tensor_entry& e) {
  const auto n = static_cast<size_t>(ctx.size);
  const auto& shape = e.input.shape;
  const auto row_bytes = static_cast<int64_t>(
    static_cast<size_t>(num_elements(shape_t(shape.begin() + 1, shape.end()))) *
    element_size(e.input.dtype));
  auto send_rows = e.splits;
  if (send_rows.empty())
    send_rows.assign(n, shape[0] / ctx.size);
  std::vector<int64_t> recv_rows(n);
  const std::vector<int64_t> one_count(n, sizeof(int64_t));
  ctx.comm.alltoall({send_rows.data(), one_count, recv_rows.data(), one_count});

  alltoall_options o;
  for (size_t r = 0; r < n; ++r) {
    o.send_bytes.push_back(send_rows[r] * row_bytes);
    o.recv_bytes.push_back(recv_rows[r] * row_bytes);
  }
  auto out_shape = shape;
  out_shape[0] = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
  // A valid pointer for an empty input too.
  char nothing = 0;
  o.input = e.input.data ? e.input.data : &nothing;
  o.output = result_buffer(e, out_shape);
  ctx.comm.alltoall(o);
  e.handle->received_splits = std::move(recv_rows);
}

} // namespace troupe::backends
