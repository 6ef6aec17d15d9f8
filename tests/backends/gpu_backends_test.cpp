// The NCCL backend and the staging of CUDA tensors through a CPU backend,
// on one rank with one GPU, against host references. Exits 77 (skipped)
// where no CUDA device is visible.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "backends/cpu/arith.hpp"
#include "backends/cuda/cuda_runtime.hpp"
#include "backends/nccl/nccl_backend.hpp"
#include "backends/registry.hpp"

namespace troupe::backends {
namespace {

const data_type every_dtype[] = {data_type::uint8,   data_type::int8,    data_type::int32,
                                 data_type::int64,   data_type::float16, data_type::bfloat16,
                                 data_type::float32, data_type::float64};

// `values` as elements of `dtype`.
std::vector<char> encode(data_type dtype, const std::vector<float>& values) {
  std::vector<char> out(values.size() * element_size(dtype));
  if (is_half(dtype)) {
    float_to_half(dtype, values.data(), out.data(), values.size());
    return out;
  }
  with_element_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto* t = reinterpret_cast<T*>(out.data());
    for (size_t i = 0; i < values.size(); ++i)
      t[i] = static_cast<T>(values[i]);
  });
  return out;
}

// Device memory holding `bytes`, freed at the end of the test.
struct device_copy {
  void* data = nullptr;
  explicit device_copy(const std::vector<char>& bytes) {
    cuda::check(cudaMalloc(&data, bytes.size() + 1), "cudaMalloc");
    cuda::check(cudaMemcpy(data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "upload");
  }
  ~device_copy() {
    cudaFree(data);
  }
  std::vector<char> download(size_t bytes) const {
    std::vector<char> out(bytes);
    cuda::check(cudaMemcpy(out.data(), data, bytes, cudaMemcpyDeviceToHost), "download");
    return out;
  }
};

std::vector<float> small_values(size_t n, int offset = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((i + static_cast<size_t>(offset)) % 5 + 1);
  return v;
}

actors::tensor_entry_ptr entry(const std::string& name, void* in, void* out, data_type dtype,
                               shape_t shape) {
  auto e = std::make_shared<actors::tensor_entry>();
  e->request.set_tensor_name(name);
  e->input = tensor{in, dtype, shape, tensor_device::cuda(0)};
  e->output = tensor{out, dtype, shape, tensor_device::cuda(0)};
  return e;
}

v1::Response response(v1::OpType op, data_type dtype) {
  v1::Response r;
  r.set_op(op);
  r.set_dtype(static_cast<v1::DataType>(dtype));
  r.set_reduce_op(v1::REDUCE_OP_SUM);
  r.set_prescale_factor(1.0);
  r.set_postscale_factor(1.0);
  r.set_device_kind(v1::DEVICE_KIND_CUDA);
  return r;
}

// Runs `work` to its end (10 s at most) and returns its status.
status run(backend& b, actors::collective_work& work) {
  auto done = b.start(work);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto result = done->poll())
      return *result;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return {status_code::timeout, "the work did not finish within 10 s"};
}

backend_context one_rank() {
  return backend_context{};
}

// Every reduction and dtype, with scaling, on one rank: the result is the
// input times prescale times postscale (AVERAGE over one rank divides by 1).
void check_allreduce_everywhere(backend& b) {
  const v1::ReduceOp ops[] = {v1::REDUCE_OP_SUM, v1::REDUCE_OP_AVERAGE, v1::REDUCE_OP_MIN,
                              v1::REDUCE_OP_MAX, v1::REDUCE_OP_PRODUCT};
  for (auto dtype : every_dtype)
    for (auto op : ops) {
      const auto values = small_values(1000);
      device_copy in(encode(dtype, values)), out(encode(dtype, small_values(1000, 3)));
      actors::collective_work w;
      w.response = response(v1::OP_TYPE_ALLREDUCE, dtype);
      w.response.set_reduce_op(op);
      w.response.set_prescale_factor(3.0);
      w.response.set_postscale_factor(2.0);
      w.entries.push_back(entry("t", in.data, out.data, dtype, {1000}));
      const auto s = run(b, w);
      ASSERT_TRUE(s.ok()) << to_string(dtype) << ": " << s.message();
      std::vector<float> expected(values);
      for (auto& v : expected)
        v *= 6;
      EXPECT_EQ(out.download(1000 * element_size(dtype)), encode(dtype, expected))
        << to_string(dtype) << " op " << op;
    }
}

TEST(nccl_backend, allreduce_every_op_and_dtype_with_scaling) {
  nccl_backend b(one_rank());
  check_allreduce_everywhere(b);
}

TEST(nccl_backend, fused_small_tensors_go_through_the_fusion_buffer) {
  nccl_backend b(one_rank());
  std::vector<std::unique_ptr<device_copy>> memory;
  actors::collective_work w;
  w.response = response(v1::OP_TYPE_ALLREDUCE, data_type::float16);
  w.response.set_postscale_factor(2.0);
  std::vector<std::vector<float>> inputs;
  for (int t = 0; t < 150; ++t) {  // more than one batched-copy launch
    inputs.push_back(small_values(static_cast<size_t>(t % 37 + 1), t));
    memory.push_back(std::make_unique<device_copy>(encode(data_type::float16, inputs.back())));
    auto* in = memory.back()->data;
    memory.push_back(std::make_unique<device_copy>(std::vector<char>(inputs.back().size() * 2)));
    w.entries.push_back(entry("t" + std::to_string(t), in, memory.back()->data,
                              data_type::float16, {static_cast<int64_t>(inputs.back().size())}));
  }
  ASSERT_TRUE(run(b, w).ok());
  for (size_t t = 0; t < inputs.size(); ++t) {
    auto expected = inputs[t];
    for (auto& v : expected)
      v *= 2;
    EXPECT_EQ(memory[2 * t + 1]->download(expected.size() * 2),
              encode(data_type::float16, expected))
      << "tensor " << t;
  }
}

TEST(nccl_backend, a_fused_allreduces_copies_are_timed_on_the_gpu) {
  nccl_backend b(one_rank());
  const size_t n = 1 << 20;  // 4 MiB each: copies long enough to measure
  const shape_t shape{static_cast<int64_t>(n)};
  device_copy a(encode(data_type::float32, small_values(n))), b_in(a.download(n * 4));
  device_copy a_out(std::vector<char>(n * 4)), b_out(std::vector<char>(n * 4));
  actors::collective_work w;
  w.response = response(v1::OP_TYPE_ALLREDUCE, data_type::float32);
  w.entries.push_back(entry("a", a.data, a_out.data, data_type::float32, shape));
  w.entries.push_back(entry("b", b_in.data, b_out.data, data_type::float32, shape));
  struct span {
    std::string activity;
    int64_t began_us_ago, ended_us_ago;
  };
  std::vector<span> spans;
  std::vector<std::string> edges;
  w.trace = [&](const std::string& activity, char phase) { edges.push_back(activity + phase); };
  w.past_trace = [&](const std::string& activity, int64_t began, int64_t ended) {
    spans.push_back({activity, began, ended});
  };
  ASSERT_TRUE(run(b, w).ok());
  EXPECT_EQ(edges, (std::vector<std::string>{"NCCL_ALLREDUCEB", "NCCL_ALLREDUCEE"}));
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].activity, "MEMCPY_IN_FUSION_BUFFER");
  EXPECT_EQ(spans[1].activity, "MEMCPY_OUT_FUSION_BUFFER");
  // 8 MiB each way take microseconds; the copy in ends before the copy
  // out begins, which ends no later than the work.
  EXPECT_GT(spans[0].began_us_ago, spans[0].ended_us_ago);
  EXPECT_GE(spans[0].ended_us_ago, spans[1].began_us_ago);
  EXPECT_GT(spans[1].began_us_ago, spans[1].ended_us_ago);
  EXPECT_GE(spans[1].ended_us_ago, 0);
  EXPECT_EQ(a_out.download(n * 4), a.download(n * 4));
  EXPECT_EQ(b_out.download(n * 4), b_in.download(n * 4));
}

TEST(nccl_backend, allgather_broadcast_alltoall_reducescatter_on_one_rank) {
  nccl_backend b(one_rank());
  const auto dtype = data_type::bfloat16;
  const auto values = small_values(6 * 4);
  const auto bytes = encode(dtype, values);
  std::vector<std::unique_ptr<device_copy>> results;
  const auto allocate = [&](const shape_t& shape) -> void* {
    results.push_back(std::make_unique<device_copy>(
      std::vector<char>(static_cast<size_t>(num_elements(shape)) * element_size(dtype))));
    return results.back()->data;
  };
  device_copy in(bytes);
  for (auto op : {v1::OP_TYPE_ALLGATHER, v1::OP_TYPE_ALLTOALL, v1::OP_TYPE_REDUCESCATTER}) {
    actors::collective_work w;
    w.response = response(op, dtype);
    w.response.add_tensor_sizes(6);
    auto e = entry("t", in.data, in.data, dtype, {6, 4});
    e->allocate = allocate;
    if (op == v1::OP_TYPE_ALLTOALL)
      e->splits = {5};  // fewer rows than the tensor has
    w.entries.push_back(e);
    ASSERT_TRUE(run(b, w).ok()) << op;
    const auto rows = op == v1::OP_TYPE_ALLTOALL ? 5 : 6;
    EXPECT_EQ(e->handle->output_shape, (shape_t{rows, 4})) << op;
    EXPECT_EQ(results.back()->download(static_cast<size_t>(rows) * 4 * 2),
              std::vector<char>(bytes.begin(), bytes.begin() + rows * 4 * 2))
      << op;
    if (op == v1::OP_TYPE_ALLTOALL) {
      EXPECT_EQ(e->handle->received_splits, (std::vector<int64_t>{5}));
    }
  }
  actors::collective_work w;
  w.response = response(v1::OP_TYPE_BROADCAST, dtype);
  w.entries.push_back(entry("t", in.data, in.data, dtype, {6, 4}));
  ASSERT_TRUE(run(b, w).ok());
  EXPECT_EQ(in.download(bytes.size()), bytes);
}

TEST(staging_backend, cuda_tensors_through_the_cpu_backend) {
  auto made = make_set_backends(one_rank(), {"", "gloo"});
  ASSERT_TRUE(made.gpu_on_cpu);
  check_allreduce_everywhere(*made.cpu);
}

} // namespace
} // namespace troupe::backends

int main(int argc, char** argv) {
  const auto problem = troupe::backends::cuda::device_problem();
  if (!problem.empty()) {
    std::printf("SKIPPED: %s\n", problem.c_str());
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
