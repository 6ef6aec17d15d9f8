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

// A communicator with a reduce-scatter of its own reduces only this rank's
// rows; else the whole tensor is reduced and this rank's rows kept, a full
// allreduce's traffic and a copy of the whole.
void run_reducescatter(const run_context& ctx, const v1::Response& resp,
                       actors::tensor_entry& e) {
  const auto& shape = e.input.shape;
  const auto esize = element_size(e.input.dtype);
  const auto row_elements =
    static_cast<size_t>(num_elements(shape_t(shape.begin() + 1, shape.end())));
  const auto rows = reducescatter_rows(shape[0], ctx.size);
  // Each rank's part, in elements, back to back in rank order.
  std::vector<size_t> counts;
  counts.reserve(rows.size());
  for (auto r : rows)
    counts.push_back(static_cast<size_t>(r) * row_elements);
  const auto me = static_cast<size_t>(ctx.rank);
  auto out_shape = shape;
  out_shape[0] = rows[me];
  char* out = result_buffer(e, out_shape);
  const auto total = static_cast<size_t>(num_elements(shape));
  if (ctx.comm.reduces_scatter(total)) {
    reduce_scatter(ctx, resp, e.input.data, out, std::move(counts), e.input.dtype);
    return;
  }
  char* scratch = scratch_buffers::at_least(ctx.scratch.copy, e.input.size_bytes());
  std::memcpy(scratch, e.input.data, e.input.size_bytes());
  reduce_in_place(ctx, resp, scratch, total, e.input.dtype);
  const size_t first = std::accumulate(counts.begin(), counts.begin() + ctx.rank, size_t{0});
  if (counts[me] > 0)
    std::memcpy(out, scratch + first * esize, counts[me] * esize);
}

} // namespace troupe::backends
