#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/collectives/reduce.hpp"

namespace troupe::backends {

namespace {

// Reduces the input into the output (the same tensor, or another), `chunk`
// bytes at a time (0 = at once).
void reduce_in_output(const run_context& ctx, const v1::Response& resp,
                      actors::tensor_entry& e, size_t chunk) {
  const size_t size = e.input.size_bytes();
  const size_t esize = element_size(e.input.dtype);
  const auto* in = static_cast<const char*>(e.input.data);
  auto* out = static_cast<char*>(e.output.data);
  if (chunk == 0 || chunk >= size)
    chunk = size;
  for (size_t at = 0; at < size; at += chunk)
    reduce_into(ctx, resp, in + at, out + at, std::min(chunk, size - at) / esize, e.input.dtype);
}

} // namespace

void run_allreduce(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e) {
  reduce_in_output(ctx, resp, e, fusion_chunk(ctx, resp, e.input.dtype));
}

namespace {

// Packs entries [first, last) (`bytes` in all) into the fusion buffer,
// reduces it as one vector and unpacks it; or, where the communicator
// reduces pieces where they lie (the host's shared segment), reduces their
// outputs as one vector without the buffer: two copies of the whole less
// (200 tensors of 4 KiB under MPI, bound ranks: 727-760 -> 646-669 us a
// step, docs/benchmarks.md run (18)).
void reduce_through_buffer(const run_context& ctx, const v1::Response& resp,
                           const std::string& activity, entry_iterator first,
                           entry_iterator last, size_t bytes) {
  if (bytes == 0)
    return;
  const auto dtype = (*first)->input.dtype;
  if (reduces_pieces(ctx, resp)) {
    buffer_pieces pieces;
    pieces.reserve(static_cast<size_t>(last - first));
    for (auto it = first; it != last; ++it) {
      auto& e = **it;
      pieces.push_back({e.output.data, e.output.size_bytes(),
                        e.output.data != e.input.data ? e.input.data : nullptr});
    }
    ctx.span(activity, 'B');
    reduce_pieces_in_place(ctx, resp, pieces, dtype);
    ctx.span(activity, 'E');
    return;
  }
  char* buffer = scratch_buffers::at_least(ctx.scratch.fusion, bytes);
  ctx.span("MEMCPY_IN_FUSION_BUFFER", 'B');
  pack_inputs(first, last, buffer);
  ctx.span("MEMCPY_IN_FUSION_BUFFER", 'E');
  ctx.span(activity, 'B');
  reduce_in_place(ctx, resp, buffer, bytes / element_size(dtype), dtype);
  ctx.span(activity, 'E');
  ctx.span("MEMCPY_OUT_FUSION_BUFFER", 'B');
  for (; first != last; ++first) {
    std::memcpy((*first)->output.data, buffer, (*first)->output.size_bytes());
    buffer += (*first)->output.size_bytes();
  }
  ctx.span("MEMCPY_OUT_FUSION_BUFFER", 'E');
}

} // namespace

void run_fused_allreduce(const run_context& ctx, const v1::Response& resp,
                         const std::vector<actors::tensor_entry_ptr>& entries) {
  const size_t chunk = fusion_chunk(ctx, resp, entries.front()->input.dtype);
  const std::string activity = ctx.trace ? backend_activity(ctx, resp.op()) : std::string();
  run_in_batches(
    entries, chunk,
    [&](actors::tensor_entry& e) {
      ctx.span(activity, 'B');
      reduce_in_output(ctx, resp, e, chunk);
      ctx.span(activity, 'E');
    },
    [&](entry_iterator first, entry_iterator last, size_t bytes) {
      reduce_through_buffer(ctx, resp, activity, first, last, bytes);
    });
}

} // namespace troupe::backends
