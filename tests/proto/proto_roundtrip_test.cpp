#include <gtest/gtest.h>

#include "proto/op_properties.hpp"
#include "troupe/v1/control.pb.h"

namespace troupe::v1 {
namespace {

using troupe::properties;

TEST(proto, request_list_round_trip) {
  RequestList list;
  list.set_process_set_id(3);
  auto* r = list.add_requests();
  r->set_request_rank(2);
  r->set_op(OP_TYPE_ALLGATHER);
  r->set_dtype(DATA_TYPE_INT64);
  r->set_tensor_name("layer1.weight");
  r->add_shape(7);
  r->add_shape(3);
  r->set_prescale_factor(0.5);
  r->set_reduce_op(REDUCE_OP_AVERAGE);
  std::string bytes = list.SerializeAsString();

  RequestList back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.process_set_id(), 3u);
  ASSERT_EQ(back.requests_size(), 1);
  const auto& b = back.requests(0);
  EXPECT_EQ(b.request_rank(), 2);
  EXPECT_EQ(b.op(), OP_TYPE_ALLGATHER);
  EXPECT_EQ(b.dtype(), DATA_TYPE_INT64);
  EXPECT_EQ(b.tensor_name(), "layer1.weight");
  EXPECT_EQ(b.shape_size(), 2);
  EXPECT_EQ(b.shape(1), 3);
  EXPECT_DOUBLE_EQ(b.prescale_factor(), 0.5);
  EXPECT_EQ(b.reduce_op(), REDUCE_OP_AVERAGE);
}

TEST(proto, response_list_round_trip_with_error) {
  ResponseList list;
  auto* ok = list.add_responses();
  ok->set_op(OP_TYPE_ALLGATHER);
  ok->add_tensor_names("g");
  ok->add_tensor_sizes(1);
  ok->add_tensor_sizes(4);
  auto* bad = list.add_responses();
  bad->set_op(OP_TYPE_ERROR);
  bad->add_tensor_names("w");
  bad->mutable_error()->set_code(ERROR_CODE_MISMATCH);
  bad->mutable_error()->set_message("Mismatched data types");
  list.mutable_tuning()->set_cache_capacity(0);

  ResponseList back;
  ASSERT_TRUE(back.ParseFromString(list.SerializeAsString()));
  ASSERT_EQ(back.responses_size(), 2);
  EXPECT_EQ(back.responses(0).tensor_sizes(1), 4);
  EXPECT_EQ(back.responses(1).op(), OP_TYPE_ERROR);
  EXPECT_EQ(back.responses(1).error().code(), ERROR_CODE_MISMATCH);
  EXPECT_EQ(back.responses(1).error().message(), "Mismatched data types");
  // A tuning field set to 0 is still a change (proto3 optional).
  ASSERT_TRUE(back.tuning().has_cache_capacity());
  EXPECT_EQ(back.tuning().cache_capacity(), 0);
  EXPECT_FALSE(back.tuning().has_fusion_threshold());
}

TEST(proto, every_op_has_one_row_of_properties) {
  EXPECT_STREQ(properties(OP_TYPE_ALLREDUCE).name, "ALLREDUCE");
  EXPECT_STREQ(properties(OP_TYPE_REDUCESCATTER).label, "reducescatter");
  EXPECT_TRUE(properties(OP_TYPE_ALLGATHER).gathers);
  EXPECT_FALSE(properties(OP_TYPE_BARRIER).cacheable);
  EXPECT_FALSE(properties(OP_TYPE_JOIN).executed);
  EXPECT_EQ(properties(OP_TYPE_ALLREDUCE).join_conflict, nullptr);
  EXPECT_NE(properties(OP_TYPE_BROADCAST).join_conflict, nullptr);
  // The reserved number and values beyond the enum allow nothing.
  for (int op : {4, 42, -1}) {
    const auto& row = properties(static_cast<OpType>(op));
    EXPECT_FALSE(row.executed || row.cacheable || row.reduces || row.gathers);
  }
}

TEST(proto, garbage_does_not_parse_as_a_request_list) {
  RequestList back;
  EXPECT_FALSE(back.ParseFromString(std::string("\xff\xff\xff\xff\x0f garbage", 13)));
}

TEST(proto, enum_numbering_matches_horovod) {
  EXPECT_EQ(DATA_TYPE_FLOAT32, 7);
  EXPECT_EQ(DATA_TYPE_BOOL, 9);
  EXPECT_EQ(REDUCE_OP_SUM, 1);
  EXPECT_EQ(OP_TYPE_REDUCESCATTER, 7);
  EXPECT_EQ(OP_TYPE_ERROR, 8);
}

} // namespace
} // namespace troupe::v1
