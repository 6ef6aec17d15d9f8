#include "proto/fusion.hpp"

#include <gtest/gtest.h>

#include "proto/agreed_response.hpp"

namespace troupe::coordinator {
namespace {

// An allreduce's Response or Request (the fields share their names).
template <class Message>
Message allreduce_of(v1::DataType dtype, v1::ReduceOp op = v1::REDUCE_OP_SUM) {
  Message m;
  m.set_op(v1::OP_TYPE_ALLREDUCE);
  m.set_dtype(dtype);
  m.set_reduce_op(op);
  m.set_prescale_factor(1.0);
  m.set_postscale_factor(1.0);
  return m;
}

v1::Response allreduce(const std::string& name, int64_t elements,
                       v1::DataType dtype = v1::DATA_TYPE_FLOAT32) {
  auto r = allreduce_of<v1::Response>(dtype);
  r.add_tensor_names(name);
  r.add_tensor_sizes(elements);
  return r;
}

std::vector<std::vector<std::string>> names(const std::vector<v1::Response>& out) {
  std::vector<std::vector<std::string>> result;
  for (const auto& r : out)
    result.emplace_back(r.tensor_names().begin(), r.tensor_names().end());
  return result;
}

TEST(fusion, packs_matching_allreduces_up_to_the_threshold) {
  // 4 floats = 16 bytes each; threshold 40 bytes fits two per bucket.
  auto out = fuse({allreduce("a", 4), allreduce("b", 4), allreduce("c", 4)}, 40);
  EXPECT_EQ(names(out), (std::vector<std::vector<std::string>>{{"a", "b"}, {"c"}}));
  EXPECT_EQ(out[0].tensor_sizes_size(), 2);
}

TEST(fusion, dtypes_and_scales_do_not_mix_but_look_ahead_keeps_filling) {
  auto scaled = allreduce("s", 1);
  scaled.set_postscale_factor(0.5);
  auto out = fuse({allreduce("f1", 1), allreduce("d", 1, v1::DATA_TYPE_FLOAT64),
                   allreduce("f2", 1), scaled, allreduce("d2", 1, v1::DATA_TYPE_FLOAT64)},
                  1 << 20);
  EXPECT_EQ(names(out),
            (std::vector<std::vector<std::string>>{{"f1", "f2"}, {"d", "d2"}, {"s"}}));
}

TEST(fusion, large_tensor_runs_alone_and_others_pass_through) {
  v1::Response bcast;
  bcast.set_op(v1::OP_TYPE_BROADCAST);
  bcast.add_tensor_names("p");
  auto out = fuse({allreduce("big", 100), bcast, allreduce("x", 1), allreduce("y", 1)}, 64);
  EXPECT_EQ(names(out),
            (std::vector<std::vector<std::string>>{{"big"}, {"p"}, {"x", "y"}}));
}

TEST(fusion, adasum_tensors_run_alone) {
  auto a = allreduce("a", 1);
  auto b = allreduce("b", 1);
  a.set_reduce_op(v1::REDUCE_OP_ADASUM);
  b.set_reduce_op(v1::REDUCE_OP_ADASUM);
  auto out = fuse({a, b}, 1 << 20);
  EXPECT_EQ(names(out), (std::vector<std::vector<std::string>>{{"a"}, {"b"}}));
}

// Allgather of `rows` (first dimension per rank) rows of `row` floats.
v1::Response allgather(const std::string& name, std::vector<int64_t> rows, int64_t row) {
  v1::Response r;
  r.set_op(v1::OP_TYPE_ALLGATHER);
  r.add_tensor_names(name);
  for (auto n : rows)
    r.add_tensor_sizes(n);
  r.add_row_elements(row);
  r.set_dtype(v1::DATA_TYPE_FLOAT32);
  return r;
}

TEST(fusion, allgathers_fuse_by_result_size_and_never_with_allreduces) {
  // Results: a 3 rows x 2 floats = 24 bytes, b 16, c 40; threshold 48.
  auto out = fuse({allgather("a", {1, 2}, 2), allreduce("r", 1), allgather("b", {2, 0}, 2),
                   allgather("c", {5, 5}, 1)},
                  48);
  EXPECT_EQ(names(out),
            (std::vector<std::vector<std::string>>{{"a", "b"}, {"r"}, {"c"}}));
  EXPECT_EQ(std::vector<int64_t>(out[0].tensor_sizes().begin(), out[0].tensor_sizes().end()),
            (std::vector<int64_t>{1, 2, 2, 0}));
  EXPECT_EQ(std::vector<int64_t>(out[0].row_elements().begin(), out[0].row_elements().end()),
            (std::vector<int64_t>{2, 2}));
}

v1::Response reducescatter(const std::string& name, int64_t elements,
                           v1::ReduceOp op = v1::REDUCE_OP_SUM) {
  auto r = allreduce(name, elements);
  r.set_op(v1::OP_TYPE_REDUCESCATTER);
  r.set_reduce_op(op);
  return r;
}

TEST(fusion, reducescatters_fuse_by_input_size_and_never_with_allreduces) {
  // 4 floats = 16 bytes each; threshold 40 bytes fits two per bucket.
  auto out = fuse({reducescatter("a", 4), allreduce("r", 4), reducescatter("b", 4),
                   reducescatter("v", 1, v1::REDUCE_OP_AVERAGE), reducescatter("c", 4),
                   reducescatter("w", 1, v1::REDUCE_OP_AVERAGE)},
                  40);
  EXPECT_EQ(names(out), (std::vector<std::vector<std::string>>{
                          {"a", "b"}, {"r"}, {"v", "w"}, {"c"}}));
  EXPECT_EQ(out[0].op(), v1::OP_TYPE_REDUCESCATTER);
  EXPECT_EQ(out[0].tensor_sizes_size(), 2);
}

TEST(fusion, only_within_keeps_groups_apart) {
  // HOROVOD_DISABLE_GROUP_FUSION: g1's members fuse, g2's too, the plain
  // calls p and q with nothing, even where g1's bucket has room.
  auto out = fuse({allreduce("a", 1), allreduce("p", 1), allreduce("x", 1), allreduce("b", 1),
                   allreduce("q", 1), allreduce("y", 1)},
                  1 << 20, {"group g1", "tensor p", "group g2", "group g1", "tensor q", "group g2"});
  EXPECT_EQ(names(out), (std::vector<std::vector<std::string>>{
                          {"a", "b"}, {"p"}, {"x", "y"}, {"q"}}));
}

TEST(fusion, threshold_zero_disables) {
  auto out = fuse({allreduce("a", 1), allreduce("b", 1)}, 0);
  EXPECT_EQ(out.size(), 2u);
}

// The agreed lists of the fast lane group requests as fuse() groups their
// responses.
v1::Request request(int64_t elements, v1::DataType dtype = v1::DATA_TYPE_FLOAT32,
                    v1::ReduceOp op = v1::REDUCE_OP_SUM) {
  auto r = allreduce_of<v1::Request>(dtype, op);
  r.add_shape(elements);
  return r;
}

TEST(fusion, requests_group_as_their_responses_fuse) {
  // 16-byte floats (4 elements), a float64, an Adasum, a broadcast, a
  // 64-byte float; threshold 40.
  std::vector<v1::Request> reqs{request(4),
                                request(4, v1::DATA_TYPE_FLOAT64),
                                request(4),
                                request(4, v1::DATA_TYPE_FLOAT32, v1::REDUCE_OP_ADASUM),
                                request(16),
                                request(4)};
  reqs.emplace_back();
  reqs.back().set_op(v1::OP_TYPE_BROADCAST);
  // Reducescatters group among themselves (7 and 9), not with allreduces;
  // 32-byte float64s.
  for (int k = 0; k < 2; ++k) {
    reqs.push_back(request(4));
    reqs.back().set_op(v1::OP_TYPE_REDUCESCATTER);
    reqs.push_back(request(4, v1::DATA_TYPE_FLOAT64));
  }
  // Allgathers of 2 floats a row, counted by their whole result (11: 3 + 1
  // rows, 32 bytes; 12: 1 + 1 rows, 16 bytes), apart from the allreduces.
  for (int k = 0; k < 2; ++k) {
    reqs.push_back(request(2));
    reqs.back().set_op(v1::OP_TYPE_ALLGATHER);
    reqs.back().add_shape(2);
  }
  std::vector<const v1::Request*> ready;
  std::vector<int64_t> bytes;
  for (const auto& r : reqs) {
    ready.push_back(&r);
    bytes.push_back(fusion_bytes(r, &r == &reqs[11] ? std::vector<int64_t>{3, 1}
                                                    : std::vector<int64_t>{1, 1}));
  }
  EXPECT_EQ(bytes[11], 32);
  EXPECT_EQ(bytes[12], 16);
  EXPECT_EQ(fusion_groups(ready, bytes, 40),
            (std::vector<std::vector<size_t>>{
              {0, 2}, {1}, {3}, {4}, {5}, {6}, {7, 9}, {8}, {10}, {11}, {12}}));
  EXPECT_EQ(fusion_groups(ready, bytes, 1 << 20),
            (std::vector<std::vector<size_t>>{
              {0, 2, 4, 5}, {1, 8, 10}, {3}, {6}, {7, 9}, {11, 12}}));
  EXPECT_EQ(fusion_groups(ready, bytes, 0),
            (std::vector<std::vector<size_t>>{
              {0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}}));
}

TEST(fusion, agreed_responses_append_as_fuse_lays_them_out) {
  auto first = allreduce("a", 4);
  EXPECT_TRUE(append_agreed(first, "b", request(3), {}));
  EXPECT_FALSE(append_agreed(first, "d", request(3, v1::DATA_TYPE_FLOAT64), {}));
  EXPECT_EQ(names({first}), (std::vector<std::vector<std::string>>{{"a", "b"}}));
  EXPECT_EQ(first.tensor_sizes(1), 3);
  // Allgathers: every rank's first dimension, then the row, per tensor.
  auto g = request(1);
  g.set_op(v1::OP_TYPE_ALLGATHER);
  g.add_shape(2);  // 1 x 2 here
  auto h = g;
  h.set_shape(0, 3);
  auto gathered = agreed_allgather_of("g", g, {1, 2});
  EXPECT_FALSE(append_agreed(gathered, "h", h, {}));
  EXPECT_TRUE(append_agreed(gathered, "h", h, {3, 0}));
  EXPECT_EQ(gathered.SerializeAsString(),
            fuse({agreed_allgather_of("g", g, {1, 2}), agreed_allgather_of("h", h, {3, 0})},
                 1 << 20)[0]
            .SerializeAsString());
}

} // namespace
} // namespace troupe::coordinator
