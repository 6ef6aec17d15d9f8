#include <cstring>

#include "backends/cpu/collectives/reduce.hpp"

namespace troupe::backends {

void run_allreduce(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e) {
  if (e.output.data != e.input.data)
    std::memcpy(e.output.data, e.input.data, e.input.size_bytes());
  reduce_in_place(ctx, resp, e.output.data, static_cast<size_t>(num_elements(e.input.shape)),
                  e.input.dtype);
}

void pack_inputs(const std::vector<actors::tensor_entry_ptr>& entries, char* buffer) {
  for (const auto& e : entries) {
    std::memcpy(buffer, e->input.data, e->input.size_bytes());
    buffer += e->input.size_bytes();
  }
}

void run_fused_allreduce(const run_context& ctx, const v1::Response& resp,
                         const std::vector<actors::tensor_entry_ptr>& entries) {
  size_t bytes = 0;
  for (const auto& e : entries)
    bytes += e->input.size_bytes();
  char* buffer = scratch_buffers::at_least(ctx.scratch.fusion, bytes);
  ctx.span("MEMCPY_IN_FUSION_BUFFER", 'B');
  pack_inputs(entries, buffer);
  ctx.span("MEMCPY_IN_FUSION_BUFFER", 'E');
  const auto dtype = entries.front()->input.dtype;
  const auto activity = backend_activity(ctx, resp.op());
  ctx.span(activity, 'B');
  reduce_in_place(ctx, resp, buffer, bytes / element_size(dtype), dtype);
  ctx.span(activity, 'E');
  ctx.span("MEMCPY_OUT_FUSION_BUFFER", 'B');
  size_t at = 0;
  for (const auto& e : entries) {
    std::memcpy(e->output.data, buffer + at, e->output.size_bytes());
    at += e->output.size_bytes();
  }
  ctx.span("MEMCPY_OUT_FUSION_BUFFER", 'E');
}

} // namespace troupe::backends
