#include "backends/cpu/collectives/reduce.hpp"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backends/cpu/arith.hpp"
#include "backends/cpu/collectives/adasum.hpp"

namespace troupe::backends {

namespace {

bool is_integer(data_type dtype) {
  return !is_half(dtype) && dtype != data_type::float32 && dtype != data_type::float64;
}

template <class T>
void divide_exact(void* data, size_t count, int by) {
  // In 64 bits: a set of 128 or more does not fit int8 (the divisor turned
  // negative), 256 not uint8 (it turned 0: SIGFPE).
  using wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  auto* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i)
    p[i] = static_cast<T>(static_cast<wide>(p[i]) / static_cast<wide>(by));
}

// AVERAGE of integers divides exactly (truncating), not via 1.0 / size,
// which would turn 6 / 3 into 1.9999... -> 1.
void divide(void* data, size_t count, data_type dtype, int by) {
  with_element_type(dtype, [&](auto* tag) {
    divide_exact<std::remove_pointer_t<decltype(tag)>>(data, count, by);
  });
}

reduce_op op_of(const v1::Response& resp) {
  return static_cast<reduce_op>(resp.reduce_op());
}

// What the library reduces with: an average is a sum, divided after.
reduce_op library_op(const v1::Response& resp) {
  return op_of(resp) == reduce_op::average ? reduce_op::sum : op_of(resp);
}

// The average's division and the postscale, applied to the reduced
// elements; empty when neither applies. A bool tensor's scaling is refused
// here, on every rank alike, before any data moves.
element_finish finish_of(const run_context& ctx, const v1::Response& resp, data_type dtype) {
  const double post = resp.postscale_factor();
  check_scalable(dtype, post);
  const int size = ctx.size;
  if (op_of(resp) == reduce_op::average && is_integer(dtype))
    return [=](void* data, size_t count) {
      divide(data, count, dtype, size);
      scale(data, count, dtype, post);
    };
  const double factor = op_of(resp) == reduce_op::average ? post / size : post;
  if (factor == 1.0)
    return {};
  return [=](void* data, size_t count) { scale(data, count, dtype, factor); };
}

void reduce_native(const run_context& ctx, const v1::Response& resp, void* data,
                   size_t count, data_type dtype) {
  if (reduces_pieces(ctx, resp)) {
    reduce_pieces_in_place(ctx, resp, buffer_piece{data, count * element_size(dtype)}, dtype);
    return;
  }
  const auto finish = finish_of(ctx, resp, dtype);
  scale(data, count, dtype, resp.prescale_factor());
  if (op_of(resp) == reduce_op::adasum)
    adasum_in_place(ctx, data, count, dtype);
  else
    ctx.comm.allreduce({data, count, dtype, library_op(resp)});
  if (finish)
    finish(data, count);
}

} // namespace

void reduce_scatter(const run_context& ctx, const v1::Response& resp, void* input,
                    bool own_input, void* output, std::vector<size_t> counts, data_type dtype) {
  auto finish = finish_of(ctx, resp, dtype);
  const size_t esize = element_size(dtype);
  const size_t bytes = std::accumulate(counts.begin(), counts.end(), size_t{0}) * esize;
  const auto in = reinterpret_cast<uintptr_t>(input);
  const auto out = reinterpret_cast<uintptr_t>(output);
  const size_t out_bytes = counts.at(static_cast<size_t>(ctx.rank)) * esize;
  // The communicator reads the input while it writes the output (an
  // allocator may hand out the input's own memory), and never scales it:
  // the caller's own copy is scaled where it is, anything else in a copy.
  if (own_input) {
    scale(input, bytes / esize, dtype, resp.prescale_factor());
  } else if (resp.prescale_factor() != 1.0 || (out < in + bytes && in < out + out_bytes)) {
    char* copy = scratch_buffers::at_least(ctx.scratch.copy, bytes);
    std::memcpy(copy, input, bytes);
    scale(copy, bytes / esize, dtype, resp.prescale_factor());
    input = copy;
  }
  ctx.comm.reducescatter(
    {input, output, std::move(counts), dtype, library_op(resp), std::move(finish)});
}

size_t fusion_chunk(const run_context& ctx, const v1::Response& resp, data_type dtype) {
  if (op_of(resp) == reduce_op::adasum)
    return 0;
  const size_t esize = element_size(dtype);
  return ctx.fusion_chunk_bytes / esize * esize;
}

bool reduces_pieces(const run_context& ctx, const v1::Response& resp) {
  return op_of(resp) != reduce_op::adasum && ctx.comm.reduces_pieces();
}

void reduce_pieces_in_place(const run_context& ctx, const v1::Response& resp,
                            piece_span pieces, data_type dtype) {
  auto finish = finish_of(ctx, resp, dtype);
  if (resp.prescale_factor() == 1.0) {
    ctx.comm.allreduce_pieces(pieces, dtype, library_op(resp), finish);
    return;
  }
  // The prescale is applied to copies in the results, never to the inputs.
  buffer_pieces scaled(pieces.begin(), pieces.end());
  for (auto& p : scaled) {
    if (p.input != nullptr)
      std::memcpy(p.data, p.input, p.bytes);
    p.input = nullptr;
    scale(p.data, p.bytes / element_size(dtype), dtype, resp.prescale_factor());
  }
  ctx.comm.allreduce_pieces(scaled, dtype, library_op(resp), finish);
}

void reduce_into(const run_context& ctx, const v1::Response& resp, const void* input,
                 void* output, size_t count, data_type dtype) {
  const size_t bytes = count * element_size(dtype);
  if (input != output && reduces_pieces(ctx, resp)) {
    reduce_pieces_in_place(ctx, resp, buffer_piece{output, bytes, input}, dtype);
    return;
  }
  if (input != output)
    std::memcpy(output, input, bytes);
  reduce_in_place(ctx, resp, output, count, dtype);
}

void reduce_in_place(const run_context& ctx, const v1::Response& resp, void* data,
                     size_t count, data_type dtype) {
  if (!is_half(dtype) || static_cast<reduce_op>(resp.reduce_op()) != reduce_op::adasum) {
    reduce_native(ctx, resp, data, count, dtype);
    return;
  }
  // Adasum's dot products and norms need float32.
  float* wide = scratch_buffers::at_least(ctx.scratch.wide, count);
  half_to_float(dtype, data, wide, count);
  reduce_native(ctx, resp, wide, count, data_type::float32);
  float_to_half(dtype, wide, data, count);
}

} // namespace troupe::backends
