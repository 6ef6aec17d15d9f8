#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "backends/cpu/arith.hpp"
#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {
namespace {

// `size` ranks holding the same data (two unless set): a sum is size times
// x. Records the element count of every allreduce, i.e. how the fused
// buffer was cut, and the parts of every reduce-scatter.
class mirror_communicator : public communicator {
public:
  int size = 2;
  int rank = 0;
  bool own_scatter = true;  // reduces_scatter()
  std::vector<size_t> calls;
  std::vector<std::vector<size_t>> scatters;

  const char* name() const override {
    return "mirror";
  }
  void connect() override {
  }
  void allreduce(const allreduce_options& o) override {
    calls.push_back(o.count);
    if (is_half(o.dtype)) {
      ASSERT_EQ(size, 2);
      half_reduction_of(o.dtype, o.op)(o.data, o.data, o.data, o.count);
      return;
    }
    ASSERT_EQ(o.dtype, data_type::float32);
    auto* p = static_cast<float*>(o.data);
    for (size_t i = 0; i < o.count; ++i)
      p[i] *= static_cast<float>(size);
  }
  bool reduces_scatter(size_t) const override {
    return own_scatter;
  }
  void reducescatter(const reducescatter_options& o) override {
    scatters.push_back(o.counts);
    ASSERT_EQ(o.dtype, data_type::float32);
    ASSERT_EQ(o.counts.size(), static_cast<size_t>(size));
    size_t first = 0;
    for (int r = 0; r < rank; ++r)
      first += o.counts[static_cast<size_t>(r)];
    const auto* in = static_cast<const float*>(o.input) + first;
    auto* out = static_cast<float*>(o.output);
    const auto n = o.counts[static_cast<size_t>(rank)];
    for (size_t i = 0; i < n; ++i)
      out[i] = in[i] * static_cast<float>(size);
    if (o.finish)
      o.finish(out, n);
  }
  void allgather(const allgather_options&) override {
    FAIL();
  }
  void broadcast(const broadcast_options&) override {
    FAIL();
  }
  void alltoall(const alltoall_options&) override {
    FAIL();
  }
  void barrier() override {
  }
  void abort() override {
  }
  void sendrecv(const void*, size_t, void*, size_t, int) override {
    FAIL();
  }
};

struct fused_case {
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> outputs;
  std::vector<actors::tensor_entry_ptr> entries;

  // Tensors of `sizes` elements holding 1, 2, 3, ... across all of them;
  // every other one reduced in place (output = input).
  explicit fused_case(const std::vector<size_t>& sizes) {
    float next = 1;
    for (size_t i = 0; i < sizes.size(); ++i) {
      inputs.emplace_back(sizes[i]);
      for (auto& x : inputs.back())
        x = next++;
      outputs.emplace_back(sizes[i], -1.0f);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto e = std::make_shared<actors::tensor_entry>();
      const shape_t shape{static_cast<int64_t>(sizes[i])};
      e->input = tensor{inputs[i].data(), data_type::float32, shape};
      e->output = i % 2 ? e->input : tensor{outputs[i].data(), data_type::float32, shape};
      entries.push_back(e);
    }
  }

  void expect_doubled() const {
    float want = 1;
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto* out = static_cast<const float*>(entries[i]->output.data);
      for (size_t k = 0; k < inputs[i].size(); ++k, ++want)
        ASSERT_EQ(out[k], 2 * want) << "tensor " << i << " element " << k;
    }
  }
};

v1::Response sum_response() {
  v1::Response r;
  r.set_op(v1::OP_TYPE_ALLREDUCE);
  r.set_reduce_op(v1::REDUCE_OP_SUM);
  r.set_prescale_factor(1);
  r.set_postscale_factor(1);
  return r;
}

struct runner {
  mirror_communicator comm;
  scratch_buffers scratch;
  actors::activity_trace trace;

  std::vector<size_t> run(fused_case& c, size_t chunk_bytes) {
    run_fused_allreduce({comm, 0, 2, scratch, trace, chunk_bytes}, sum_response(), c.entries);
    return comm.calls;
  }
};

TEST(fused_allreduce, small_tensors_share_chunks_and_large_ones_reduce_where_they_are) {
  // 512-byte chunks (128 floats): a tensor of 1/32 of that (16 bytes, 4
  // floats) or more is reduced where it is, as it comes: 6, 4, then 200 in
  // two calls (128 + 72). The smaller ones (1, 2, 3, 1, 1, 3) gather in one
  // chunk, whatever lies between them, and go last.
  fused_case c({1, 2, 6, 3, 1, 1, 4, 200, 3});
  runner r;
  EXPECT_EQ(r.run(c, 512), (std::vector<size_t>{6, 4, 128, 72, 11}));
  c.expect_doubled();
  // The large tensors never went through the fusion buffer.
  EXPECT_LE(r.scratch.fusion.size(), 11 * sizeof(float));
}

TEST(fused_allreduce, small_tensors_fill_chunks_in_list_order) {
  // 50 tensors of 3 floats around one of 200, 512-byte chunks: 42 small
  // ones fill a chunk (126 floats; a 43rd would overflow it), the other 8
  // the next one.
  std::vector<size_t> sizes(50, 3);
  sizes.insert(sizes.begin() + 20, 200);
  fused_case c(sizes);
  runner r;
  EXPECT_EQ(r.run(c, 512), (std::vector<size_t>{128, 72, 126, 24}));
  c.expect_doubled();
}

TEST(fused_allreduce, a_chunk_is_whole_elements) {
  fused_case c({3, 3});
  runner r;
  EXPECT_EQ(r.run(c, 10), (std::vector<size_t>{2, 1, 2, 1}));  // 10 bytes: 2 floats
  c.expect_doubled();
}

TEST(fused_allreduce, no_chunk_or_a_large_one_reduces_everything_at_once) {
  for (size_t chunk : {size_t{0}, size_t{1} << 20}) {
    fused_case c({5, 7, 1});
    runner r;
    EXPECT_EQ(r.run(c, chunk), (std::vector<size_t>{13}));
    c.expect_doubled();
  }
}

TEST(single_allreduce, a_large_tensor_is_reduced_in_chunks_where_it_is) {
  // 10 floats in 16-byte chunks: 4 + 4 + 2, into the output (a copy of the
  // input first) and in place.
  for (size_t chunk : {size_t{16}, size_t{0}}) {
    fused_case c({10, 10});
    runner r;
    for (auto& e : c.entries)
      run_allreduce({r.comm, 0, 2, r.scratch, r.trace, chunk}, sum_response(), *e);
    EXPECT_EQ(r.comm.calls, chunk ? (std::vector<size_t>{4, 4, 2, 4, 4, 2})
                                  : (std::vector<size_t>{10, 10}));
    c.expect_doubled();
    EXPECT_EQ(r.scratch.fusion.size(), 0u);
  }
}

// Reducescatters of `shapes` (float32; every element a different value,
// 1, 2, 3, ... across all of them) on rank `rank` of `size`.
struct scatter_case {
  std::vector<std::vector<float>> inputs;
  std::vector<actors::tensor_entry_ptr> entries;

  explicit scatter_case(const std::vector<shape_t>& shapes) {
    float next = 1;
    for (const auto& shape : shapes) {
      inputs.emplace_back(static_cast<size_t>(num_elements(shape)));
      for (auto& x : inputs.back())
        x = next++;
      auto e = std::make_shared<actors::tensor_entry>();
      e->input = tensor{inputs.back().data(), data_type::float32, shape};
      entries.push_back(e);
    }
  }

  // Each tensor's result: this rank's rows (Horovod's split: the first
  // rows % size ranks one more), each element times `factor`.
  void expect_parts(int rank, int size, float factor) const {
    for (size_t t = 0; t < entries.size(); ++t) {
      const auto& shape = entries[t]->input.shape;
      const auto rows = reducescatter_rows(shape[0], size);
      int64_t first = 0;
      for (int r = 0; r < rank; ++r)
        first += rows[static_cast<size_t>(r)];
      auto want_shape = shape;
      want_shape[0] = rows[static_cast<size_t>(rank)];
      const auto& h = *entries[t]->handle;
      ASSERT_EQ(h.output_shape, want_shape) << "tensor " << t;
      const auto row = num_elements(shape_t(shape.begin() + 1, shape.end()));
      const auto n = static_cast<size_t>(num_elements(want_shape));
      ASSERT_EQ(h.output.size(), n * sizeof(float)) << "tensor " << t;
      const auto* got = reinterpret_cast<const float*>(h.output.data());
      for (size_t k = 0; k < n; ++k)
        ASSERT_EQ(got[k], factor * inputs[t][static_cast<size_t>(first * row) + k])
          << "tensor " << t << " element " << k;
    }
  }
};

v1::Response scatter_response(v1::ReduceOp op = v1::REDUCE_OP_SUM, double post = 1) {
  auto r = sum_response();
  r.set_op(v1::OP_TYPE_REDUCESCATTER);
  r.set_reduce_op(op);
  r.set_postscale_factor(post);
  return r;
}

TEST(fused_reducescatter, small_tensors_go_as_one_reduce_scatter_rank_part_by_rank_part) {
  // Rank 1 of 3: uneven rows, fewer rows than ranks, none, three dimensions.
  scatter_case c({{7, 2}, {1, 3}, {0, 4}, {3, 2, 2}, {5}});
  runner r;
  r.comm.size = 3;
  r.comm.rank = 1;
  run_fused_reducescatter({r.comm, 1, 3, r.scratch, r.trace, 1 << 20}, scatter_response(),
                          c.entries);
  // Rows per rank: 3/2/2, 1/0/0, 0/0/0, 1/1/1, 2/2/1.
  ASSERT_EQ(r.comm.scatters.size(), 1u);
  EXPECT_EQ(r.comm.scatters[0], (std::vector<size_t>{6 + 3 + 0 + 4 + 2, 4 + 4 + 2, 4 + 4 + 1}));
  c.expect_parts(1, 3, 3);
}

TEST(fused_reducescatter, an_average_is_finished_on_every_part) {
  scatter_case c({{4, 3}, {5}});
  runner r;
  run_fused_reducescatter({r.comm, 0, 2, r.scratch, r.trace, 1 << 20},
                          scatter_response(v1::REDUCE_OP_AVERAGE, 3), c.entries);
  ASSERT_EQ(r.comm.scatters.size(), 1u);
  c.expect_parts(0, 2, 3);  // (x + x) / 2 * 3
}

TEST(fused_reducescatter, large_tensors_go_alone_and_small_ones_fill_chunks) {
  // 512-byte chunks: a tensor of 16 bytes (4 floats) or more goes alone, as
  // it comes ({8, 2} and {40}); the others (3 floats each) are batched, 42 a
  // chunk (126 floats).
  std::vector<shape_t> shapes(50, shape_t{3});
  shapes.insert(shapes.begin() + 10, shape_t{8, 2});
  shapes.insert(shapes.begin() + 30, shape_t{40});
  scatter_case c(shapes);
  runner r;
  r.comm.rank = 1;
  run_fused_reducescatter({r.comm, 1, 2, r.scratch, r.trace, 512}, scatter_response(), c.entries);
  EXPECT_EQ(r.comm.scatters, (std::vector<std::vector<size_t>>{
                               {8, 8}, {20, 20}, {42 * 2, 42 * 1}, {8 * 2, 8 * 1}}));
  c.expect_parts(1, 2, 2);
}

TEST(fused_reducescatter, tensors_of_no_bytes_get_their_empty_results) {
  // Alone in the list, after a large one, and with no columns: every rank
  // skips the collective alike, and each result still has its shape.
  for (auto shapes : {std::vector<shape_t>{{0, 3}, {0, 2}},
                      std::vector<shape_t>{{40}, {0, 3}},
                      std::vector<shape_t>{{4, 0}, {0}}}) {
    scatter_case c(shapes);
    runner r;
    r.comm.rank = 1;
    run_fused_reducescatter({r.comm, 1, 2, r.scratch, r.trace, 512}, scatter_response(),
                            c.entries);
    EXPECT_EQ(r.comm.scatters.size(), shapes[0] == shape_t{40} ? 1u : 0u);
    c.expect_parts(1, 2, 2);
  }
}

TEST(fused_reducescatter, a_prescale_scales_a_copy_never_the_inputs) {
  for (bool own_scatter : {true, false}) {
    scatter_case c({{3, 2}, {5}});
    const auto inputs = c.inputs;
    runner r;
    r.comm.own_scatter = own_scatter;
    auto resp = scatter_response(v1::REDUCE_OP_SUM, 0.5);
    resp.set_prescale_factor(3);
    run_fused_reducescatter({r.comm, 0, 2, r.scratch, r.trace, 1 << 20}, resp, c.entries);
    c.expect_parts(0, 2, 3);  // (3x + 3x) * 0.5
    EXPECT_EQ(c.inputs, inputs);
  }
}

TEST(fused_reducescatter, without_a_reduce_scatter_the_packed_whole_is_allreduced) {
  scatter_case c({{5, 2}, {2}, {4}});
  runner r;
  r.comm.size = 3;
  r.comm.rank = 2;
  r.comm.own_scatter = false;
  run_fused_reducescatter({r.comm, 2, 3, r.scratch, r.trace, 1 << 20}, scatter_response(),
                          c.entries);
  EXPECT_TRUE(r.comm.scatters.empty());
  EXPECT_EQ(r.comm.calls, (std::vector<size_t>{16}));
  c.expect_parts(2, 3, 3);
}

TEST(half_reduction, rounds_each_result_to_16_bits) {
  // 2049 is not a float16: 2048 + 1 rounds to even (2048).
  std::vector<float> a{2048, 1.5f, -3, 65504};
  std::vector<float> b{1, 2.25f, 7, 65504};
  std::vector<uint16_t> x(a.size()), y(b.size()), z(a.size());
  float_to_half(data_type::float16, a.data(), x.data(), a.size());
  float_to_half(data_type::float16, b.data(), y.data(), b.size());
  half_reduction_of(data_type::float16, reduce_op::sum)(z.data(), x.data(), y.data(), z.size());
  std::vector<float> sum(z.size());
  half_to_float(data_type::float16, z.data(), sum.data(), z.size());
  EXPECT_EQ(sum, (std::vector<float>{2048, 3.75f, 4, std::numeric_limits<float>::infinity()}));
  EXPECT_THROW(half_reduction_of(data_type::float16, reduce_op::adasum), backend_error);
  EXPECT_THROW(half_reduction_of(data_type::float32, reduce_op::sum), backend_error);
}

TEST(half_reduction, bfloat16_min_max_product) {
  std::vector<float> a{1, -2, 0.5f}, b{3, -4, 8};
  std::vector<uint16_t> x(3), y(3), z(3);
  float_to_half(data_type::bfloat16, a.data(), x.data(), 3);
  float_to_half(data_type::bfloat16, b.data(), y.data(), 3);
  std::vector<float> out(3);
  half_reduction_of(data_type::bfloat16, reduce_op::min)(z.data(), x.data(), y.data(), 3);
  half_to_float(data_type::bfloat16, z.data(), out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1, -4, 0.5f}));
  half_reduction_of(data_type::bfloat16, reduce_op::max)(z.data(), x.data(), y.data(), 3);
  half_to_float(data_type::bfloat16, z.data(), out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{3, -2, 8}));
  half_reduction_of(data_type::bfloat16, reduce_op::product)(z.data(), x.data(), y.data(), 3);
  half_to_float(data_type::bfloat16, z.data(), out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{3, 8, 4}));
}

TEST(half_scale, scales_in_float32_and_rounds_once) {
  std::vector<float> a{3, 1000, -7};
  std::vector<uint16_t> h(3);
  float_to_half(data_type::float16, a.data(), h.data(), 3);
  scale(h.data(), 3, data_type::float16, 0.5);
  std::vector<float> out(3);
  half_to_float(data_type::float16, h.data(), out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.5f, 500, -3.5f}));
}

} // namespace
} // namespace troupe::backends
