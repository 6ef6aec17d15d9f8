#include "coordinator/message_table.hpp"

#include <climits>

#include <gtest/gtest.h>

#include "coordinator/request_intake.hpp"
#include "coordinator/response_cache.hpp"

namespace troupe::coordinator {
namespace {

v1::Request request(int rank, const std::string& name,
                    v1::OpType op = v1::OP_TYPE_ALLREDUCE,
                    v1::DataType dtype = v1::DATA_TYPE_FLOAT32,
                    std::vector<int64_t> shape = {4}) {
  v1::Request r;
  r.set_request_rank(rank);
  r.set_tensor_name(name);
  r.set_op(op);
  r.set_dtype(dtype);
  for (auto d : shape)
    r.add_shape(d);
  r.set_prescale_factor(1.0);
  r.set_postscale_factor(1.0);
  r.set_reduce_op(v1::REDUCE_OP_SUM);
  return r;
}

TEST(message_table, ready_only_when_every_rank_asked) {
  message_table t{3};
  EXPECT_FALSE(t.add(request(0, "a")));
  EXPECT_FALSE(t.add(request(2, "a")));
  EXPECT_FALSE(t.has_ready());
  EXPECT_EQ(t.pending(), 1u);
  EXPECT_FALSE(t.add(request(1, "a")));
  ASSERT_TRUE(t.has_ready());
  auto resp = t.pop_ready();
  EXPECT_EQ(resp.op(), v1::OP_TYPE_ALLREDUCE);
  ASSERT_EQ(resp.tensor_names_size(), 1);
  EXPECT_EQ(resp.tensor_names(0), "a");
  EXPECT_FALSE(t.has_ready());
  EXPECT_EQ(t.pending(), 0u);
}

TEST(message_table, order_is_the_order_tensors_became_ready) {
  message_table t{2};
  // Rank 0 submits a, b, c; rank 1 submits c, a, b.
  for (auto name : {"a", "b", "c"})
    t.add(request(0, name));
  for (auto name : {"c", "a", "b"})
    t.add(request(1, name));
  std::vector<std::string> order;
  while (t.has_ready())
    order.push_back(t.pop_ready().tensor_names(0));
  EXPECT_EQ(order, (std::vector<std::string>{"c", "a", "b"}));
}

TEST(message_table, partial_submission_never_blocks_others) {
  message_table t{2};
  t.add(request(0, "only_rank0"));
  t.add(request(0, "both"));
  t.add(request(1, "both"));
  ASSERT_TRUE(t.has_ready());
  EXPECT_EQ(t.pop_ready().tensor_names(0), "both");
  EXPECT_FALSE(t.has_ready());
  auto missing = t.missing_ranks(message_table::clock::now() + std::chrono::seconds(1));
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].first, "only_rank0");
  EXPECT_EQ(missing[0].second, std::vector<int32_t>{1});
}

TEST(message_table, rejects_out_of_range_rank_and_duplicates) {
  message_table t{2};
  EXPECT_TRUE(t.add(request(2, "x")));
  EXPECT_TRUE(t.add(request(-1, "x")));
  EXPECT_FALSE(t.add(request(0, "x")));
  auto err = t.add(request(0, "x"));
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("twice"), std::string::npos);
  EXPECT_FALSE(t.has_ready());
}

TEST(message_table, name_can_be_reused_after_completion) {
  message_table t{2};
  for (int round = 0; round < 3; ++round) {
    t.add(request(0, "loss"));
    t.add(request(1, "loss"));
    ASSERT_TRUE(t.has_ready());
    EXPECT_EQ(t.pop_ready().op(), v1::OP_TYPE_ALLREDUCE);
  }
}

v1::Response resolve(std::vector<v1::Request> reqs) {
  message_table t{static_cast<int32_t>(reqs.size())};
  for (auto& r : reqs)
    t.add(r);
  EXPECT_TRUE(t.has_ready());
  return t.pop_ready();
}

TEST(message_table, dtype_mismatch_names_tensor_and_ranks) {
  auto resp = resolve({request(0, "w"), request(1, "w", v1::OP_TYPE_ALLREDUCE,
                                                  v1::DATA_TYPE_INT32)});
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_EQ(resp.error().code(), v1::ERROR_CODE_MISMATCH);
  EXPECT_EQ(resp.error().message(),
            "Mismatched data types for tensor 'w': rank 0 sent float32, rank 1 sent int32.");
}

TEST(message_table, shape_mismatch_groups_ranks) {
  auto resp = resolve({request(0, "w"), request(1, "w"),
                       request(2, "w", v1::OP_TYPE_ALLREDUCE, v1::DATA_TYPE_FLOAT32, {5})});
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_EQ(resp.error().message(),
            "Mismatched tensor shapes for tensor 'w': ranks 0,1 sent [4], rank 2 sent [5].");
}

TEST(message_table, op_mismatch) {
  auto resp = resolve({request(0, "w"), request(1, "w", v1::OP_TYPE_BROADCAST)});
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_EQ(resp.error().message(),
            "Mismatched operations for tensor 'w': rank 0 sent ALLREDUCE, rank 1 sent "
            "BROADCAST.");
}

TEST(message_table, broadcast_root_mismatch) {
  auto a = request(0, "p", v1::OP_TYPE_BROADCAST);
  auto b = request(1, "p", v1::OP_TYPE_BROADCAST);
  b.set_root_rank(1);
  auto resp = resolve({a, b});
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_NE(resp.error().message().find("root ranks"), std::string::npos);
}

TEST(message_table, allgather_collects_first_dimensions) {
  auto resp = resolve({request(0, "g", v1::OP_TYPE_ALLGATHER, v1::DATA_TYPE_INT64, {1, 3}),
                       request(1, "g", v1::OP_TYPE_ALLGATHER, v1::DATA_TYPE_INT64, {2, 3}),
                       request(2, "g", v1::OP_TYPE_ALLGATHER, v1::DATA_TYPE_INT64, {0, 3})});
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ALLGATHER);
  EXPECT_EQ(std::vector<int64_t>(resp.tensor_sizes().begin(), resp.tensor_sizes().end()),
            (std::vector<int64_t>{1, 2, 0}));
}

TEST(message_table, allgather_trailing_dimension_mismatch) {
  auto resp = resolve({request(0, "g", v1::OP_TYPE_ALLGATHER, v1::DATA_TYPE_INT64, {1, 3}),
                       request(1, "g", v1::OP_TYPE_ALLGATHER, v1::DATA_TYPE_INT64, {1, 4})});
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_EQ(resp.error().message(),
            "Mismatched trailing dimensions (all but the first) for tensor 'g': rank 0 sent "
            "[3], rank 1 sent [4].");
}

v1::Request member(int rank, const std::string& name, const std::string& group, int size) {
  auto r = request(rank, name);
  r.set_group_name(group);
  r.set_group_size(size);
  return r;
}

TEST(message_table, group_is_released_only_when_every_member_is_ready) {
  message_table t{2};
  t.add(member(0, "g.0", "g", 2));
  t.add(member(1, "g.0", "g", 2));
  t.add(request(0, "solo"));
  t.add(request(1, "solo"));
  ASSERT_TRUE(t.has_ready());
  EXPECT_EQ(t.pop_ready().tensor_names(0), "solo");
  EXPECT_FALSE(t.has_ready());  // g.0 waits for g.1
  t.add(member(1, "g.1", "g", 2));
  EXPECT_FALSE(t.has_ready());
  t.add(member(0, "g.1", "g", 2));
  ASSERT_TRUE(t.has_ready());
  EXPECT_EQ(t.pop_ready().tensor_names(0), "g.0");
  ASSERT_TRUE(t.has_ready());
  EXPECT_EQ(t.pop_ready().tensor_names(0), "g.1");
}

TEST(message_table, group_disagreement_is_an_error_not_a_hang) {
  message_table t{2};
  t.add(member(0, "x", "g", 2));
  t.add(request(1, "x"));
  ASSERT_TRUE(t.has_ready());
  auto resp = t.pop_ready();
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_EQ(resp.error().message(),
            "Mismatched groups for tensor 'x': rank 0 sent 'g' of 2, rank 1 sent no group.");
}

v1::Request join_request(int rank) {
  v1::Request r;
  r.set_request_rank(rank);
  r.set_op(v1::OP_TYPE_JOIN);
  r.set_tensor_name(message_table::join_name);
  return r;
}

TEST(message_table, joined_ranks_no_longer_block_allreduce) {
  message_table t{3};
  t.add(request(2, "w"));
  EXPECT_FALSE(t.has_ready());
  t.add(join_request(0));
  EXPECT_FALSE(t.has_ready());
  t.add(join_request(1));  // now only rank 2, which asked, is active
  ASSERT_TRUE(t.has_ready());
  auto resp = t.pop_ready();
  EXPECT_EQ(resp.op(), v1::OP_TYPE_ALLREDUCE);
  ASSERT_EQ(resp.tensor_sizes_size(), 1);
  EXPECT_EQ(resp.tensor_sizes(0), 4);  // joined ranks contribute 4 zeros
  t.add(join_request(2));
  ASSERT_TRUE(t.has_ready());
  resp = t.pop_ready();
  EXPECT_EQ(resp.op(), v1::OP_TYPE_JOIN);
  EXPECT_EQ(resp.last_joined_rank(), 2);
  // A new round: nobody is joined any more.
  t.add(request(0, "next"));
  EXPECT_FALSE(t.has_ready());
}

// Rank 0 asks for "w" and joins; rank 1 only joins, last: "w" runs (rank 1
// contributing zeros) before the JOIN that ends the round.
TEST(message_table, the_last_join_first_releases_what_it_made_ready) {
  message_table t{2};
  t.add(request(0, "w"));
  t.add(join_request(0));
  EXPECT_FALSE(t.has_ready());
  t.add(join_request(1));
  ASSERT_TRUE(t.has_ready());
  auto resp = t.pop_ready();
  EXPECT_EQ(resp.op(), v1::OP_TYPE_ALLREDUCE);
  ASSERT_EQ(resp.tensor_names_size(), 1);
  EXPECT_EQ(resp.tensor_names(0), "w");
  ASSERT_TRUE(t.has_ready());
  resp = t.pop_ready();
  EXPECT_EQ(resp.op(), v1::OP_TYPE_JOIN);
  EXPECT_EQ(resp.last_joined_rank(), 1);
  EXPECT_FALSE(t.has_ready());
  // Nothing of "w" is left to pair with a later round.
  t.add(request(1, "w"));
  EXPECT_FALSE(t.has_ready());
  EXPECT_EQ(t.missing_ranks(message_table::clock::now() + std::chrono::hours(1)).size(), 1u);
}

TEST(message_table, a_tensor_named_as_the_join_and_a_rank_without_an_end_are_refused) {
  message_table t{2};
  const auto err = t.add(request(0, message_table::join_name));
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(*err, "ALLREDUCE of 'join.noname' from rank 0: that name is reserved for join()");
  EXPECT_FALSE(t.has_ready());
  // Its sender gets an answer (no wait for ever), and only its sender: a
  // pending join() of that name on the others stays pending.
  auto failed = t.take_failed();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].op(), v1::OP_TYPE_ERROR);
  EXPECT_EQ(failed[0].tensor_names(0), message_table::join_name);
  ASSERT_TRUE(failed[0].has_only_rank());
  EXPECT_EQ(failed[0].only_rank(), 0);
  EXPECT_EQ(failed[0].error().message(),
            "ALLREDUCE of 'join.noname' from rank 0: that name is reserved for join()");
  EXPECT_TRUE(t.add(request(INT32_MAX, "x")).has_value());
  EXPECT_FALSE(t.has_ready());
}

// A member's list speaks for that member (a tree node's, for its subtree):
// a request in it for another rank would take that rank's place.
TEST(request_intake, a_list_carries_requests_only_for_its_own_ranks) {
  message_table table{3};
  response_cache cache{4, 3};
  v1::RequestList list;
  list.set_sender_rank(0);
  list.set_ranks_end(1);
  *list.add_requests() = request(1, "x");
  *list.add_requests() = request(0, "y");
  auto ignored = take_requests(list, table, cache);
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_EQ(ignored[0], "the list of set ranks [0, 1) carried a request for 'x' from set ranks "
                        "[1, 2)");
  v1::RequestList own;
  own.set_sender_rank(1);
  own.set_ranks_end(2);
  *own.add_requests() = request(1, "x");
  EXPECT_TRUE(take_requests(own, table, cache).empty());  // rank 1's own "x" is its first
}

TEST(message_table, allgather_with_joined_ranks_is_horovods_error) {
  message_table t{2};
  t.add(join_request(0));
  t.add(request(1, "g", v1::OP_TYPE_ALLGATHER, v1::DATA_TYPE_FLOAT32, {2}));
  ASSERT_TRUE(t.has_ready());
  auto resp = t.pop_ready();
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_EQ(resp.error().message(),
            "Allgather is not supported with Join at this time. Specify sparse_to_dense=True "
            "if using DistributedOptimizer");
  EXPECT_TRUE(t.add(join_request(0)).has_value());  // joined twice
}

} // namespace
} // namespace troupe::coordinator

namespace troupe::coordinator {
namespace {

v1::Request with_deadline(v1::Request r, int64_t ms) {
  r.set_deadline_ms(ms);
  return r;
}

v1::Request grouped(v1::Request r, const std::string& group, int size) {
  r.set_group_name(group);
  r.set_group_size(size);
  return r;
}

TEST(message_table, missed_deadline_fails_everywhere_naming_the_late_rank) {
  message_table t{3};
  t.add(with_deadline(request(0, "set.add.1", v1::OP_TYPE_ALLGATHER), 5000));
  t.add(with_deadline(request(1, "set.add.1", v1::OP_TYPE_ALLGATHER), 5000));
  ASSERT_TRUE(t.next_deadline());
  const auto due = *t.next_deadline();
  EXPECT_TRUE(t.expire(due - std::chrono::milliseconds(1)).empty());
  auto errors = t.expire(due);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("'set.add.1'"), std::string::npos);
  EXPECT_NE(errors[0].find("rank(s) 2 "), std::string::npos);
  EXPECT_NE(errors[0].find("within 5 s"), std::string::npos);
  auto failed = t.take_failed();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].error().code(), v1::ERROR_CODE_TIMEOUT);
  EXPECT_EQ(t.pending(), 0u);
  EXPECT_FALSE(t.next_deadline());
  // The late rank's request fails at once, with the same text, and is not
  // left waiting for ranks that gave up.
  t.add(with_deadline(request(2, "set.add.1", v1::OP_TYPE_ALLGATHER), 5000));
  EXPECT_EQ(t.pending(), 0u);
  auto late = t.take_failed();
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].error().message(), failed[0].error().message());
  // For rank 2 alone: the others may have asked for a new round meanwhile.
  EXPECT_FALSE(failed[0].has_only_rank());
  ASSERT_TRUE(late[0].has_only_rank());
  EXPECT_EQ(late[0].only_rank(), 2);
  // Owed once: a new round of the same name negotiates normally.
  for (int r = 0; r < 3; ++r)
    t.add(request(r, "set.add.1", v1::OP_TYPE_ALLGATHER));
  EXPECT_TRUE(t.has_ready());
  EXPECT_FALSE(t.has_failed());
}

TEST(message_table, abandoning_a_group_member_fails_the_whole_group) {
  message_table t{2};
  // Rank 0's group has a and b, rank 1's has a and c: a is ready but waits
  // for its group, which can never complete.
  t.add(grouped(request(0, "a"), "g", 2));
  t.add(grouped(request(0, "b"), "g", 2));
  t.add(grouped(request(1, "a"), "g", 2));
  t.add(grouped(request(1, "c"), "g", 2));
  EXPECT_FALSE(t.has_ready());
  // The stall check sees the released member too, with the ranks its group
  // waits for.
  auto missing = t.missing_ranks(message_table::clock::now() + std::chrono::seconds(1));
  std::sort(missing.begin(), missing.end());
  ASSERT_EQ(missing.size(), 3u);
  EXPECT_EQ(missing[0].first, "a");
  EXPECT_EQ(missing[0].second, (std::vector<int32_t>{0, 1}));
  t.abandon("b", v1::ERROR_CODE_TIMEOUT, "stalled");
  auto failed = t.take_failed();
  std::vector<std::string> names;
  for (const auto& f : failed)
    names.push_back(f.tensor_names(0));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(t.pending(), 0u);
  EXPECT_TRUE(t.missing_ranks(message_table::clock::now() + std::chrono::hours(1)).empty());
  // The group name is free again.
  t.add(grouped(request(0, "a"), "g", 1));
  t.add(grouped(request(1, "a"), "g", 1));
  EXPECT_TRUE(t.has_ready());
}

TEST(message_table, cpu_gpu_mix_is_horovods_device_error) {
  message_table t{2};
  auto gpu = request(1, "x");
  gpu.set_device_kind(v1::DEVICE_KIND_CUDA);
  t.add(request(0, "x"));
  t.add(gpu);
  auto resp = t.pop_ready();
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_NE(resp.error().message().find(
              "Mismatched ALLREDUCE CPU/GPU device selection: One rank specified device CPU, "
              "but another rank specified device GPU"),
            std::string::npos);
  EXPECT_NE(resp.error().message().find("rank 0 sent CPU, rank 1 sent GPU"), std::string::npos);
}

TEST(message_table, a_malformed_request_fails_its_tensor_everywhere) {
  message_table t{2};
  t.add(request(0, "w"));
  auto bad = request(1, "w");
  bad.set_shape(0, -5);  // the API never sends this: a broken or hostile peer
  auto err = t.add(bad);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("rank 1 sent an invalid request: tensor 'w': negative dimension"),
            std::string::npos);
  auto failed = t.take_failed();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(t.pending(), 0u);
  // Unknown op and dtype numbers from the wire are refused the same way.
  auto unknown = request(0, "u");
  unknown.set_op(static_cast<v1::OpType>(42));
  EXPECT_TRUE(t.add(unknown));
  auto dtype = request(0, "d");
  dtype.set_dtype(static_cast<v1::DataType>(99));
  EXPECT_TRUE(t.add(dtype));
  EXPECT_EQ(t.take_failed().size(), 2u);
  // The name is usable again.
  t.add(request(0, "w"));
  t.add(request(1, "w"));
  EXPECT_TRUE(t.has_ready());
}

// A tensor as the response cache holds it: every member's request.
cached_tensor_ptr cached(const std::string& name, int size, std::vector<int64_t> shape = {4}) {
  auto t = std::make_shared<cached_tensor>();
  t->name = name;
  for (int r = 0; r < size; ++r)
    t->by_rank.push_back(std::make_shared<const v1::Request>(
      request(r, name, v1::OP_TYPE_ALLREDUCE, v1::DATA_TYPE_FLOAT32, shape)));
  return t;
}

TEST(message_table, hits_on_one_cached_tensor_are_counted_and_agreed) {
  message_table t{3};
  const auto a = cached("a", 3);
  EXPECT_FALSE(t.add_hit(2, a));
  EXPECT_FALSE(t.add_hit(0, a));
  EXPECT_FALSE(t.has_ready());
  EXPECT_EQ(t.missing_ranks(message_table::clock::now() + std::chrono::hours(1)),
            (std::vector<std::pair<std::string, std::vector<int32_t>>>{{"a", {1}}}));
  EXPECT_TRUE(t.add_hit(2, a));  // twice before it completed
  EXPECT_FALSE(t.add_hit(1, a));
  ASSERT_TRUE(t.has_ready());
  message_table::sent sent;
  const auto resp = t.pop_ready(&sent);
  EXPECT_EQ(sent.cached, a);  // no requests copied
  EXPECT_TRUE(sent.by_rank.empty());
  EXPECT_EQ(resp.SerializeAsString(), make_response("a", a->by_rank).SerializeAsString());
}

TEST(message_table, a_full_request_among_hits_is_checked_against_them) {
  message_table t{3};
  const auto a = cached("a", 3);
  t.add_hit(0, a);
  t.add(request(1, "a", v1::OP_TYPE_ALLREDUCE, v1::DATA_TYPE_FLOAT32, {8}));
  t.add_hit(2, a);
  ASSERT_TRUE(t.has_ready());
  message_table::sent sent;
  const auto resp = t.pop_ready(&sent);
  EXPECT_FALSE(sent.cached);
  ASSERT_EQ(sent.by_rank.size(), 3u);
  EXPECT_EQ(sent.by_rank[2]->shape(0), 4);
  EXPECT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_NE(resp.error().message().find("ranks 0,2 sent [4], rank 1 sent [8]"), std::string::npos)
    << resp.error().message();
}

TEST(message_table, hits_on_two_versions_of_a_tensor_are_checked) {
  message_table t{2};
  t.add_hit(0, cached("a", 2, {4}));
  t.add_hit(1, cached("a", 2, {6}));
  ASSERT_TRUE(t.has_ready());
  const auto resp = t.pop_ready();
  EXPECT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_NE(resp.error().message().find("rank 0 sent [4], rank 1 sent [6]"), std::string::npos)
    << resp.error().message();
}

TEST(message_table, hits_with_a_joined_rank_run_with_zeros) {
  message_table t{3};
  const auto w = cached("w", 3);
  t.add_hit(2, w);
  t.add(join_request(0));
  t.add_hit(1, w);
  ASSERT_TRUE(t.has_ready());
  message_table::sent sent;
  const auto resp = t.pop_ready(&sent);
  EXPECT_EQ(resp.op(), v1::OP_TYPE_ALLREDUCE);
  EXPECT_FALSE(sent.cached);  // a joined rank has no request: not cacheable
  EXPECT_FALSE(sent.by_rank[0]);
}

TEST(message_table, a_hit_for_an_abandoned_tensor_fails_at_once) {
  message_table t{2};
  const auto a = cached("a", 2);
  t.add_hit(0, a);
  t.abandon("a", v1::ERROR_CODE_TIMEOUT, "gone");
  EXPECT_EQ(t.take_failed().size(), 1u);
  EXPECT_FALSE(t.add_hit(1, a));  // rank 1 still owed it: answered, not pending
  EXPECT_EQ(t.take_failed().size(), 1u);
  EXPECT_EQ(t.pending(), 0u);
}

// Found by fuzz/control_messages_fuzzer (inputs kept in its corpus).
TEST(message_table, a_joined_ranks_request_does_not_release_a_tensor_twice) {
  message_table t{2};
  t.add(request(1, "w"));
  t.add(join_request(0));  // "w" runs without rank 0
  ASSERT_TRUE(t.has_ready());
  t.add(request(0, "w"));  // a broken peer asks after joining
  t.pop_ready();
  EXPECT_FALSE(t.has_ready());  // was ready twice: the second pop read freed memory
}

TEST(message_table, a_ready_tensor_failed_by_a_malformed_request_is_not_popped) {
  message_table t{2};
  t.add(request(0, "w"));
  t.add(request(1, "w"));
  ASSERT_TRUE(t.has_ready());
  auto bad = request(1, "w");
  bad.set_shape(0, -1);
  EXPECT_TRUE(t.add(bad));
  EXPECT_EQ(t.take_failed().size(), 1u);
  EXPECT_FALSE(t.has_ready());
}

TEST(message_table, a_group_needs_a_name) {
  message_table t{2};
  auto unnamed = request(1, "w");
  unnamed.set_group_size(2);  // a held member once outlived its failure
  auto err = t.add(unnamed);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("a group of 2 tensors needs a group name"), std::string::npos) << *err;
}

// Found by fuzz/control_messages_fuzzer (input kept in its corpus).
TEST(message_table, a_deadline_beyond_10_years_is_refused) {
  message_table t{1};
  auto r = request(0, "late");
  r.set_deadline_ms(int64_t{18577348462903295});
  auto err = t.add(r);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("deadline of 18577348462903295 ms is beyond 10 years"), std::string::npos)
    << *err;
  EXPECT_FALSE(t.has_ready());
}

TEST(message_table, a_shape_beyond_2_pow_63_bytes_is_refused) {
  message_table t{1};
  auto err = t.add(request(0, "huge", v1::OP_TYPE_ALLREDUCE, v1::DATA_TYPE_FLOAT32,
                           {int64_t{1} << 40, int64_t{1} << 40}));
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("does not fit in 2^63 bytes"), std::string::npos) << *err;
  EXPECT_FALSE(t.has_ready());
}

// A control-tree node merged its subtree's equal requests into one range.
TEST(message_table, a_request_for_a_range_of_ranks_is_held_once) {
  message_table t{6};
  auto merged = request(1, "a");
  merged.set_hit_ranks_end(5);
  EXPECT_FALSE(t.add(request(0, "a")));
  EXPECT_FALSE(t.add(merged));
  EXPECT_FALSE(t.has_ready());
  // A rank of the range asking again is a broken peer: nothing recorded.
  auto err = t.add(request(3, "a"));
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("rank 3 requested 'a' twice"), std::string::npos) << *err;
  EXPECT_FALSE(t.add(request(5, "a")));
  ASSERT_TRUE(t.has_ready());
  message_table::sent sent;
  auto resp = t.pop_ready(&sent);
  EXPECT_EQ(resp.op(), v1::OP_TYPE_ALLREDUCE);
  ASSERT_EQ(sent.by_rank.size(), 6u);
  for (size_t r = 2; r < 5; ++r)
    EXPECT_EQ(sent.by_rank[r], sent.by_rank[1]);  // one object for the range
  EXPECT_NE(sent.by_rank[0], sent.by_rank[1]);
  // A range that disagrees is named as a group of ranks.
  auto odd = request(2, "b", v1::OP_TYPE_ALLREDUCE, v1::DATA_TYPE_FLOAT32, {8});
  odd.set_hit_ranks_end(4);
  for (int r : {0, 1, 4, 5})
    EXPECT_FALSE(t.add(request(r, "b")));
  EXPECT_FALSE(t.add(odd));
  resp = t.pop_ready();
  ASSERT_EQ(resp.op(), v1::OP_TYPE_ERROR);
  EXPECT_NE(resp.error().message().find("ranks 0,1,4,5 sent [4], ranks 2,3 sent [8]"),
            std::string::npos)
    << resp.error().message();
  // Ranges outside the set are refused.
  auto outside = request(4, "c");
  outside.set_hit_ranks_end(7);
  err = t.add(outside);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("set ranks [4, 7) outside the set of size 6"), std::string::npos) << *err;
}

} // namespace
} // namespace troupe::coordinator
