#include "backends/collectives/collectives.hpp"

namespace troupe::backends {

void run_allgather(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e) {
  const auto& shape = e.input.shape;
  const int64_t row = num_elements(shape_t(shape.begin() + 1, shape.end()));
  allgather_options o;
  o.input = e.input.data;
  o.dtype = e.input.dtype;
  int64_t rows = 0;
  for (auto dim0 : resp.tensor_sizes()) {
    o.counts.push_back(static_cast<size_t>(dim0 * row));
    rows += dim0;
  }
  auto& h = *e.handle;
  h.output_shape = shape;
  h.output_shape[0] = rows;
  // One spare byte keeps the pointer valid when every rank sent nothing.
  h.output.resize(static_cast<size_t>(rows * row) * element_size(o.dtype) + 1);
  o.output = h.output.data();
  ctx.b.allgather(o);
  h.output.pop_back();
}

void run_broadcast(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e) {
  broadcast_options o;
  o.data = e.input.data;
  o.count = static_cast<size_t>(num_elements(e.input.shape));
  o.dtype = e.input.dtype;
  o.root = resp.root_rank();
  ctx.b.broadcast(o);
}

} // namespace troupe::backends
