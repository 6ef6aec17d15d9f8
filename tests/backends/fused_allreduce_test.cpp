#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "backends/cpu/arith.hpp"
#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {
namespace {

// Two ranks holding the same data: each allreduce is x op x. Records the
// element count of every call, i.e. how the fused buffer was cut.
class mirror_communicator : public communicator {
public:
  std::vector<size_t> calls;

  const char* name() const override {
    return "mirror";
  }
  void connect() override {
  }
  void allreduce(const allreduce_options& o) override {
    calls.push_back(o.count);
    if (is_half(o.dtype)) {
      half_reduction_of(o.dtype, o.op)(o.data, o.data, o.data, o.count);
      return;
    }
    ASSERT_EQ(o.dtype, data_type::float32);
    auto* p = static_cast<float*>(o.data);
    for (size_t i = 0; i < o.count; ++i)
      p[i] += p[i];
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
