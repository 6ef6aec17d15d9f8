// What a member checks of a response before a backend runs it.
#include <gtest/gtest.h>

#include "proto/request_checks.hpp"

namespace troupe {
namespace {

v1::Response response(v1::OpType op, std::vector<std::string> names) {
  v1::Response r;
  r.set_op(op);
  for (auto& n : names)
    r.add_tensor_names(std::move(n));
  return r;
}

TEST(response_checks, well_formed_responses_pass) {
  auto reduce = response(v1::OP_TYPE_ALLREDUCE, {"a", "b"});
  reduce.add_tensor_sizes(4);
  reduce.add_tensor_sizes(0);
  EXPECT_EQ(check_response(reduce, 3), "");
  auto gather = response(v1::OP_TYPE_ALLGATHER, {"g"});
  for (int r = 0; r < 3; ++r)
    gather.add_tensor_sizes(r);
  gather.add_row_elements(5);
  EXPECT_EQ(check_response(gather, 3), "");
  EXPECT_EQ(check_response(response(v1::OP_TYPE_JOIN, {"join.noname"}), 3), "");
  EXPECT_EQ(check_response(response(v1::OP_TYPE_BROADCAST, {"w"}), 3), "");
  auto scatter = response(v1::OP_TYPE_REDUCESCATTER, {"s", "t"});
  scatter.add_tensor_sizes(6);
  scatter.add_tensor_sizes(9);
  EXPECT_EQ(check_response(scatter, 3), "");
  auto error = response(v1::OP_TYPE_ERROR, {"x"});
  error.mutable_error()->set_code(v1::ERROR_CODE_MISMATCH);
  EXPECT_EQ(check_response(error, 3), "");
}

TEST(response_checks, what_would_crash_or_misindex_a_backend_is_named) {
  EXPECT_EQ(check_response(response(v1::OP_TYPE_JOIN, {}), 2), "JOIN response names no tensor");
  EXPECT_EQ(check_response(response(v1::OP_TYPE_ALLREDUCE, {"a", ""}), 2),
            "ALLREDUCE response for 'a' and others names a tensor without a name");
  EXPECT_EQ(check_response(response(v1::OP_TYPE_ERROR, {"x"}), 2),
            "ERROR response for 'x' has no error code");
  auto reduce = response(v1::OP_TYPE_ALLREDUCE, {"a", "b"});
  reduce.add_tensor_sizes(4);
  EXPECT_EQ(check_response(reduce, 2),
            "ALLREDUCE response for 'a' and others has 1 tensor_sizes for 2 tensor(s), not 2");
  reduce.add_tensor_sizes(-1);
  EXPECT_EQ(check_response(reduce, 2),
            "ALLREDUCE response for 'a' and others has a size below 0 or above 2^48 elements");
  EXPECT_EQ(check_response(response(v1::OP_TYPE_REDUCESCATTER, {"s"}), 2),
            "REDUCESCATTER response for 's' has 0 tensor_sizes for 1 tensor(s), not 1");
  auto gather = response(v1::OP_TYPE_ALLGATHER, {"g", "h"});
  for (int i = 0; i < 4; ++i)
    gather.add_tensor_sizes(1);
  EXPECT_EQ(check_response(gather, 3),
            "ALLGATHER response for 'g' and others has 4 tensor_sizes for 2 tensor(s), not 6");
  gather.add_tensor_sizes(1);
  gather.add_tensor_sizes(1);
  gather.add_row_elements(2);
  EXPECT_EQ(check_response(gather, 3),
            "ALLGATHER response for 'g' and others has 1 row_elements for 2 tensor(s), not 2");
  gather.add_row_elements(int64_t{1} << 50);
  EXPECT_EQ(check_response(gather, 3),
            "ALLGATHER response for 'g' and others has a size below 0 or above 2^48 elements");
}

} // namespace
} // namespace troupe
