#include <cstring>

#include "backends/cpu/collectives/collectives.hpp"

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
  auto out_shape = shape;
  out_shape[0] = rows;
  o.output = result_buffer(e, out_shape);
  ctx.comm.allgather(o);
}

void run_fused_allgather(const run_context& ctx, const v1::Response& resp,
                         const std::vector<actors::tensor_entry_ptr>& entries) {
  const auto tensors = entries.size();
  const auto ranks = static_cast<size_t>(ctx.size);
  const auto dtype = entries.front()->input.dtype;
  const auto esize = element_size(dtype);
  // rows(t, r): first dimension of tensor t on rank r.
  auto rows = [&](size_t t, size_t r) {
    return static_cast<size_t>(resp.tensor_sizes(static_cast<int>(t * ranks + r)));
  };
  auto row_bytes = [&](size_t t) {
    return static_cast<size_t>(resp.row_elements(static_cast<int>(t))) * esize;
  };
  allgather_options o;
  o.dtype = dtype;
  size_t total = 0;
  for (size_t r = 0; r < ranks; ++r) {
    size_t block = 0;
    for (size_t t = 0; t < tensors; ++t)
      block += rows(t, r) * row_bytes(t);
    o.counts.push_back(block / esize);
    total += block;
  }
  const size_t mine = o.counts[static_cast<size_t>(ctx.rank)] * esize;
  // Own block first, then room for everyone's: one persistent buffer.
  char* buffer = scratch_buffers::at_least(ctx.scratch.fusion, mine + total + 1);
  ctx.span("MEMCPY_IN_FUSION_BUFFER", 'B');
  pack_inputs(entries.begin(), entries.end(), buffer);
  ctx.span("MEMCPY_IN_FUSION_BUFFER", 'E');
  o.input = buffer;
  o.output = buffer + mine;
  const auto activity = backend_activity(ctx, resp.op());
  ctx.span(activity, 'B');
  ctx.comm.allgather(o);
  ctx.span(activity, 'E');
  ctx.span("MEMCPY_OUT_FUSION_BUFFER", 'B');
  std::vector<char*> out(tensors);
  for (size_t t = 0; t < tensors; ++t) {
    size_t all_rows = 0;
    for (size_t r = 0; r < ranks; ++r)
      all_rows += rows(t, r);
    auto shape = entries[t]->input.shape;
    shape[0] = static_cast<int64_t>(all_rows);
    out[t] = result_buffer(*entries[t], shape);
  }
  const char* from = buffer + mine;
  for (size_t r = 0; r < ranks; ++r)
    for (size_t t = 0; t < tensors; ++t) {
      const auto n = rows(t, r) * row_bytes(t);
      if (n > 0)
        std::memcpy(out[t], from, n);
      out[t] += n;
      from += n;
    }
  ctx.span("MEMCPY_OUT_FUSION_BUFFER", 'E');
}

void run_broadcast(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e) {
  broadcast_options o;
  o.data = e.input.data;
  o.count = static_cast<size_t>(num_elements(e.input.shape));
  o.dtype = e.input.dtype;
  o.root = resp.root_rank();
  ctx.comm.broadcast(o);
}

} // namespace troupe::backends
