#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/collectives/reduce.hpp"

namespace troupe::backends {

namespace {

// A tensor of at least 1/32 of a chunk (32 KiB of the default 1 MiB) is
// reduced in its own output, in calls of a chunk, rather than copied into
// the fusion buffer and out again: past that size the two copies cost more
// than the extra library call. Under MPI here, 64 tensors of 32 KiB took
// 607 us one call each against 597 us packed in 1 MiB pieces, of 64 KiB
// 877 against 1,157 us, of 256 KiB 2,777 against 4,886 us; the ResNet-50
// step went from 1.07 to 1.00 x raw MPI (docs/benchmarks.md).
constexpr size_t in_place_fraction = 32;

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

// Whole elements per chunk (0: at once). Every rank cuts the same chunks:
// the response fixes the tensors, their order and their sizes. Adasum's
// dot products and norms span the whole vector.
size_t chunk_of(const run_context& ctx, const v1::Response& resp, data_type dtype) {
  if (static_cast<reduce_op>(resp.reduce_op()) == reduce_op::adasum)
    return 0;
  const size_t esize = element_size(dtype);
  return ctx.fusion_chunk_bytes / esize * esize;
}

} // namespace

void run_allreduce(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e) {
  reduce_in_output(ctx, resp, e, chunk_of(ctx, resp, e.input.dtype));
}

void pack_inputs(entry_iterator first, entry_iterator last, char* buffer) {
  for (; first != last; ++first) {
    std::memcpy(buffer, (*first)->input.data, (*first)->input.size_bytes());
    buffer += (*first)->input.size_bytes();
  }
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

// Reduces entries [first, last) through the fusion buffer, as many
// consecutive ones at a time as fit in `chunk` (0: all at once).
void reduce_packed(const run_context& ctx, const v1::Response& resp, const std::string& activity,
                   entry_iterator first, entry_iterator last, size_t chunk) {
  auto begin = first;
  size_t filled = 0;
  for (auto it = first; it != last; ++it) {
    const size_t size = (*it)->input.size_bytes();
    if (chunk != 0 && filled > 0 && filled + size > chunk) {
      reduce_through_buffer(ctx, resp, activity, begin, it, filled);
      begin = it;
      filled = 0;
    }
    filled += size;
  }
  if (filled > 0)
    reduce_through_buffer(ctx, resp, activity, begin, last, filled);
}

} // namespace

void run_fused_allreduce(const run_context& ctx, const v1::Response& resp,
                         const std::vector<actors::tensor_entry_ptr>& entries) {
  const size_t chunk = chunk_of(ctx, resp, entries.front()->input.dtype);
  const std::string activity = ctx.trace ? backend_activity(ctx, resp.op()) : std::string();
  const size_t in_place = chunk / in_place_fraction;
  const auto large = [&](const actors::tensor_entry_ptr& e) {
    return e->input.size_bytes() >= in_place;
  };
  if (chunk == 0 || std::none_of(entries.begin(), entries.end(), large)) {
    reduce_packed(ctx, resp, activity, entries.begin(), entries.end(), chunk);
    return;
  }
  // A tensor of `in_place` bytes or more is reduced where it is, in calls
  // of a chunk, as it comes; the smaller ones gather in the buffer in list
  // order, whatever lies between them, and go a chunk at a time at the end.
  // Every rank cuts alike: the response fixes the tensors and their sizes.
  std::vector<actors::tensor_entry_ptr> small;
  for (const auto& e : entries) {
    if (!large(e)) {
      small.push_back(e);
      continue;
    }
    ctx.span(activity, 'B');
    reduce_in_output(ctx, resp, *e, chunk);
    ctx.span(activity, 'E');
  }
  reduce_packed(ctx, resp, activity, small.begin(), small.end(), chunk);
}

} // namespace troupe::backends
