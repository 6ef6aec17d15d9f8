#include <cstring>
#include <numeric>
#include <vector>

#include "backends/cpu/collectives/reduce.hpp"

namespace troupe::backends {

std::vector<int64_t> reducescatter_rows(int64_t rows, int size) {
  std::vector<int64_t> out(static_cast<size_t>(size), rows / size);
  for (int64_t r = 0; r < rows % size; ++r)
    ++out[static_cast<size_t>(r)];
  return out;
}

namespace {

// Each rank's rows of `e`'s input (Horovod's split) and its part, in
// elements, in rank order.
struct rank_parts {
  std::vector<int64_t> rows;
  std::vector<size_t> counts;
};

rank_parts parts_of(const actors::tensor_entry& e, int size) {
  const auto& shape = e.input.shape;
  const auto row_elements =
    static_cast<size_t>(num_elements(shape_t(shape.begin() + 1, shape.end())));
  rank_parts p{reducescatter_rows(shape[0], size), {}};
  p.counts.reserve(p.rows.size());
  for (auto r : p.rows)
    p.counts.push_back(static_cast<size_t>(r) * row_elements);
  return p;
}

// The result of `e` for this rank's `rows` rows.
char* part_result(actors::tensor_entry& e, int64_t rows) {
  auto shape = e.input.shape;
  shape[0] = rows;
  return result_buffer(e, shape);
}

// This rank's part of the reduction of `input` (`counts` elements per
// rank, back to back) into `output`: the communicator's reduce-scatter
// where it has one (which copies `input` first if `output` overlaps it),
// else the whole vector reduced in a copy and this rank's part kept; with
// `own_input` (the caller's own copy, apart from `output`) in `input`
// itself.
void reduce_part(const run_context& ctx, const v1::Response& resp, char* input, bool own_input,
                 char* output, std::vector<size_t> counts, data_type dtype) {
  const auto esize = element_size(dtype);
  const auto me = static_cast<size_t>(ctx.rank);
  const auto total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  if (ctx.comm.reduces_scatter(total)) {
    reduce_scatter(ctx, resp, input, own_input, output, std::move(counts), dtype);
    return;
  }
  char* whole = input;
  if (!own_input) {
    whole = scratch_buffers::at_least(ctx.scratch.copy, total * esize);
    if (total > 0)
      std::memcpy(whole, input, total * esize);
  }
  reduce_in_place(ctx, resp, whole, total, dtype);
  const size_t first = std::accumulate(counts.begin(), counts.begin() + ctx.rank, size_t{0});
  if (counts[me] > 0)
    std::memcpy(output, whole + first * esize, counts[me] * esize);
}

// Tensors [first, last) (`bytes` of input in all) as one reduce-scatter:
// packed into the fusion buffer rank part by rank part, this rank's part
// reduced after them, then copied out to each tensor's result.
void reduce_scatter_batch(const run_context& ctx, const v1::Response& resp,
                          const std::string& activity, entry_iterator first, entry_iterator last,
                          size_t bytes) {
  const auto dtype = (*first)->input.dtype;
  const auto esize = element_size(dtype);
  const auto ranks = static_cast<size_t>(ctx.size);
  const auto me = static_cast<size_t>(ctx.rank);
  std::vector<rank_parts> parts;  // per tensor
  std::vector<size_t> counts(ranks, 0);
  for (auto it = first; it != last; ++it) {
    parts.push_back(parts_of(**it, ctx.size));
    for (size_t r = 0; r < ranks; ++r)
      counts[r] += parts.back().counts[r];
  }
  const size_t mine = counts[me] * esize;
  char* buffer = scratch_buffers::at_least(ctx.scratch.fusion, bytes + mine + 1);
  ctx.span("MEMCPY_IN_FUSION_BUFFER", 'B');
  std::vector<const char*> from;
  for (auto it = first; it != last; ++it)
    from.push_back(static_cast<const char*>((*it)->input.data));
  char* to = buffer;
  for (size_t r = 0; r < ranks; ++r)
    for (size_t t = 0; t < parts.size(); ++t) {
      const auto n = parts[t].counts[r] * esize;
      if (n > 0)
        std::memcpy(to, from[t], n);
      to += n;
      from[t] += n;
    }
  ctx.span("MEMCPY_IN_FUSION_BUFFER", 'E');
  char* part = buffer + bytes;
  // Every rank has the same shapes: none reduces nothing.
  if (bytes > 0) {
    ctx.span(activity, 'B');
    reduce_part(ctx, resp, buffer, true, part, std::move(counts), dtype);
    ctx.span(activity, 'E');
  }
  ctx.span("MEMCPY_OUT_FUSION_BUFFER", 'B');
  size_t t = 0;
  for (auto it = first; it != last; ++it, ++t) {
    const auto n = parts[t].counts[me] * esize;
    if (char* out = part_result(**it, parts[t].rows[me]); n > 0)
      std::memcpy(out, part, n);
    part += n;
  }
  ctx.span("MEMCPY_OUT_FUSION_BUFFER", 'E');
}

} // namespace

// A communicator with a reduce-scatter of its own reduces only this rank's
// rows; else the whole tensor is reduced and this rank's rows kept, a full
// allreduce's traffic and a copy of the whole.
void run_reducescatter(const run_context& ctx, const v1::Response& resp,
                       actors::tensor_entry& e) {
  auto parts = parts_of(e, ctx.size);
  char* out = part_result(e, parts.rows[static_cast<size_t>(ctx.rank)]);
  // (The input is read only: the copy, where one is made, is reduced.)
  reduce_part(ctx, resp, static_cast<char*>(e.input.data), false, out, std::move(parts.counts),
              e.input.dtype);
}

void run_fused_reducescatter(const run_context& ctx, const v1::Response& resp,
                             const std::vector<actors::tensor_entry_ptr>& entries) {
  const auto activity = ctx.trace ? backend_activity(ctx, resp.op()) : std::string();
  run_in_batches(
    entries, fusion_chunk(ctx, resp, entries.front()->input.dtype),
    [&](actors::tensor_entry& e) {
      ctx.span(activity, 'B');
      run_reducescatter(ctx, resp, e);
      ctx.span(activity, 'E');
    },
    [&](entry_iterator first, entry_iterator last, size_t bytes) {
      reduce_scatter_batch(ctx, resp, activity, first, last, bytes);
    });
}

} // namespace troupe::backends
