#include <cstring>
#include <vector>

#include "backends/cpu/collectives/reduce.hpp"

namespace troupe::backends {

std::vector<int64_t> reducescatter_rows(int64_t rows, int size) {
  std::vector<int64_t> out(static_cast<size_t>(size), rows / size);
  for (int64_t r = 0; r < rows % size; ++r)
    ++out[static_cast<size_t>(r)];
  return out;
}

// Reduces the whole tensor, then keeps this rank's rows. Costs a full
// allreduce's traffic; a backend with a native reduce-scatter can do better.
void run_reducescatter(const run_context& ctx, const v1::Response& resp,
                       actors::tensor_entry& e) {
  const auto& shape = e.input.shape;
  const auto esize = element_size(e.input.dtype);
  const auto row_bytes =
    static_cast<size_t>(num_elements(shape_t(shape.begin() + 1, shape.end()))) * esize;
  char* scratch = scratch_buffers::at_least(ctx.scratch.copy, e.input.size_bytes());
  std::memcpy(scratch, e.input.data, e.input.size_bytes());
  reduce_in_place(ctx, resp, scratch, static_cast<size_t>(num_elements(shape)), e.input.dtype);
  const auto rows = reducescatter_rows(shape[0], ctx.size);
  int64_t first = 0;
  for (int r = 0; r < ctx.rank; ++r)
    first += rows[static_cast<size_t>(r)];
  auto out_shape = shape;
  out_shape[0] = rows[static_cast<size_t>(ctx.rank)];
  const auto bytes = static_cast<size_t>(out_shape[0]) * row_bytes;
  char* out = result_buffer(e, out_shape);
  if (bytes > 0)
    std::memcpy(out, scratch + static_cast<size_t>(first) * row_bytes, bytes);
}

} // namespace troupe::backends
