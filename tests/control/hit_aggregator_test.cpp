// What an inner node of the control tree does with its subtree's lists:
// hits aggregated, full requests merged, flushes, the hold, progress.
#include <algorithm>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "control/control_tree.hpp"
#include "control/hit_aggregator.hpp"
#include "coordinator/message_table.hpp"
#include "coordinator/request_intake.hpp"
#include "coordinator/response_cache.hpp"

namespace troupe::control {
namespace {

using namespace std::chrono_literals;
using clock_type = hit_aggregator::clock;

// One member's RequestList: hits (id, list that named it) from `rank`.
v1::RequestList hits(int32_t rank, uint64_t applied,
                     std::vector<std::pair<uint32_t, uint64_t>> ids) {
  v1::RequestList list;
  list.set_sender_rank(rank);
  list.set_ranks_end(rank + 1);
  list.set_lists_applied(applied);
  for (auto [id, named] : ids) {
    auto* req = list.add_requests();
    req->set_request_rank(rank);
    req->set_cache_id(id);
    req->set_cache_list(named);
  }
  return list;
}

struct hit_up {
  uint32_t id;
  uint64_t list;
  int32_t first, end;
  bool operator==(const hit_up& o) const {
    return id == o.id && list == o.list && first == o.first && end == o.end;
  }
};

std::ostream& operator<<(std::ostream& out, const hit_up& h) {
  return out << "(" << h.id << "@" << h.list << " [" << h.first << "," << h.end << "))";
}

std::vector<hit_up> hits_in(const v1::RequestList& list) {
  std::vector<hit_up> out;
  for (const auto& r : list.requests())
    if (r.cache_id() != 0)
      out.push_back({r.cache_id(), r.cache_list(), r.request_rank(), r.hit_ranks_end()});
  return out;
}

// Set rank 1 of 7 with fanout 2: the subtree [1, 4), children 2 and 3.
tree_node inner_node() {
  auto node = control_tree_node(1, 7, 2);
  EXPECT_EQ(node.end, 4);
  EXPECT_EQ(node.children, (std::vector<int32_t>{2, 3}));
  return node;
}

TEST(hit_aggregator, a_subtree_whose_ranks_all_hit_goes_up_as_one_hit) {
  const auto t = clock_type::now();
  hit_aggregator agg(inner_node(), 1s);
  agg.add(hits(1, 9, {{5, 9}}), t);
  agg.add(hits(3, 9, {{5, 9}}), t);
  EXPECT_FALSE(agg.take(t));
  agg.add(hits(2, 9, {{5, 9}}), t);
  auto up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 9, 1, 4}}));
  EXPECT_EQ(up->sender_rank(), 1);
  EXPECT_EQ(up->ranks_end(), 4);
  EXPECT_EQ(up->lists_applied(), 9u);
  EXPECT_EQ(agg.held(), 0u);
  EXPECT_FALSE(agg.next_deadline());
  const auto sent = agg.take_counts();
  EXPECT_EQ(sent.aggregated, 1u);
  EXPECT_EQ(sent.passed, 0u);
}

TEST(hit_aggregator, a_full_request_takes_the_held_hits_up_and_their_round_follows_as_it_comes) {
  const auto t = clock_type::now();
  hit_aggregator agg(inner_node(), 1s);
  agg.add(hits(1, 9, {{5, 9}, {6, 9}}), t);
  agg.add(hits(2, 9, {{6, 9}}), t);
  EXPECT_FALSE(agg.take(t));
  v1::RequestList full;
  full.set_sender_rank(3);
  full.set_ranks_end(4);
  auto* req = full.add_requests();
  req->set_request_rank(3);
  req->set_tensor_name("x");  // rank 3 changed x's shape, say
  agg.add(full, t);
  auto up = agg.take(t);
  ASSERT_TRUE(up);
  ASSERT_EQ(up->requests_size(), 3);
  EXPECT_EQ(up->requests(2).tensor_name(), "x");  // after the hits it released
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 9, 1, 2}, {6, 9, 1, 3}}));
  // The rest of those rounds goes up at once; a new round is held again.
  agg.add(hits(3, 9, {{6, 9}}), t);
  up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{6, 9, 3, 4}}));
  const auto sent = agg.take_counts();
  EXPECT_EQ(sent.aggregated, 0u);
  EXPECT_EQ(sent.passed, 3u);
  agg.add(hits(1, 12, {{6, 12}}), t);
  EXPECT_FALSE(agg.take(t));
  EXPECT_EQ(agg.held(), 1u);
}

// One member's full request for `name` (first dimension `length`).
v1::RequestList full_request(int32_t rank, uint64_t applied, const std::string& name,
                             int64_t length = 4) {
  v1::RequestList list;
  list.set_sender_rank(rank);
  list.set_ranks_end(rank + 1);
  list.set_lists_applied(applied);
  auto* req = list.add_requests();
  req->set_request_rank(rank);
  req->set_tensor_name(name);
  req->set_op(v1::OP_TYPE_ALLREDUCE);
  req->add_shape(length);
  return list;
}

// (first rank, end) of each full request in `list`.
std::vector<std::pair<int32_t, int32_t>> requests_in(const v1::RequestList& list) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const auto& r : list.requests())
    if (r.cache_id() == 0)
      out.emplace_back(r.request_rank(),
                       r.hit_ranks_end() > 0 ? r.hit_ranks_end() : r.request_rank() + 1);
  return out;
}

TEST(hit_aggregator, full_requests_are_merged_unless_a_rank_names_their_tensor_by_id) {
  const auto t = clock_type::now();
  static const std::string x = "x";
  hit_aggregator agg(inner_node(), 1s, [](uint32_t id, uint64_t) -> const std::string* {
    return id == 5 ? &x : nullptr;
  });
  using ranges = std::vector<std::pair<int32_t, int32_t>>;
  // Every rank of [1, 4) in full: one request goes up.
  agg.add(full_request(2, 8, "x"), t);
  agg.add(full_request(1, 8, "x"), t);
  EXPECT_FALSE(agg.take(t));
  agg.add(full_request(3, 8, "x"), t);
  auto up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(requests_in(*up), (ranges{{1, 4}}));
  // Next round rank 2 has x cached: rank 1's held request goes up with
  // its hit, and rank 3's follows as it comes.
  agg.add(full_request(1, 9, "x"), t);
  EXPECT_FALSE(agg.take(t));
  agg.add(hits(2, 9, {{5, 9}}), t);
  up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(requests_in(*up), (ranges{{1, 2}}));
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 9, 2, 3}}));
  agg.add(full_request(3, 9, "x"), t);
  up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(requests_in(*up), (ranges{{3, 4}}));
  auto sent = agg.take_request_counts();
  EXPECT_EQ(sent.merged, 1u);
  EXPECT_EQ(sent.passed, 2u);
  // The round is over (every rank seen): the next one is merged again.
  for (int32_t r : {3, 1, 2})
    agg.add(full_request(r, 10, "x", 8), t);
  up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(requests_in(*up), (ranges{{1, 4}}));
  EXPECT_EQ(up->requests(0).shape(0), 8);
  // Hits first, then a full request (rank 3 changed x's shape): the held
  // hits and the request go up at once, nothing waits for the hold.
  agg.add(hits(1, 11, {{5, 11}}), t);
  agg.add(hits(2, 11, {{5, 11}}), t);
  EXPECT_FALSE(agg.take(t));
  agg.add(full_request(3, 11, "x", 16), t);
  up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 11, 1, 3}}));
  EXPECT_EQ(requests_in(*up), (ranges{{3, 4}}));
  EXPECT_EQ(agg.held(), 0u);
  EXPECT_FALSE(agg.next_deadline());
}

TEST(hit_aggregator, a_response_list_ends_the_rounds_of_its_tensors) {
  const auto t = clock_type::now();
  hit_aggregator agg(inner_node(), 1s);
  using ranges = std::vector<std::pair<int32_t, int32_t>>;
  // Ranks 1 and 3 sent x before they were placed in the tree: only rank
  // 2's request reaches the node, and goes up after the hold.
  agg.add(full_request(2, 0, "x"), t);
  auto up = agg.take(t + 1s);
  ASSERT_TRUE(up);
  EXPECT_EQ(requests_in(*up), (ranges{{2, 3}}));
  v1::ResponseList answer;
  answer.add_responses()->add_tensor_names("x");
  EXPECT_FALSE(agg.answered(answer));  // nothing was held
  // The next round is merged, whichever rank comes first.
  for (int32_t r : {1, 2, 3})
    agg.add(full_request(r, 1, "x"), t + 2s);
  up = agg.take(t + 2s);
  ASSERT_TRUE(up);
  EXPECT_EQ(requests_in(*up), (ranges{{1, 4}}));
  // A held round the coordinator answered without (an error) goes up.
  agg.add(full_request(1, 2, "x"), t + 3s);
  EXPECT_TRUE(agg.answered(answer));
  up = agg.take(t + 3s);
  ASSERT_TRUE(up);
  EXPECT_EQ(requests_in(*up), (ranges{{1, 2}}));
  EXPECT_EQ(agg.held(), 0u);
}

TEST(hit_aggregator, a_full_request_takes_up_only_the_held_hits_of_its_tensor_when_named) {
  const auto t = clock_type::now();
  // This node's member knows id 5 as "x" and id 6 as "y" (as of list 9);
  // id 7 only as of another list.
  static const std::string x = "x", y = "y";
  hit_aggregator agg(inner_node(), 1s, [](uint32_t id, uint64_t list) -> const std::string* {
    if (list != 9)
      return nullptr;
    return id == 5 ? &x : id == 6 ? &y : nullptr;
  });
  agg.add(hits(1, 9, {{5, 9}, {6, 9}, {7, 4}}), t);
  v1::RequestList full;
  full.set_sender_rank(2);
  full.set_ranks_end(3);
  auto* req = full.add_requests();
  req->set_request_rank(2);
  req->set_tensor_name("x");  // rank 2 changed x's shape
  agg.add(full, t);
  auto up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 9, 1, 2}, {7, 4, 1, 2}}));
  // y still waits for its subtree.
  agg.add(hits(2, 9, {{6, 9}}), t);
  agg.add(hits(3, 9, {{6, 9}}), t);
  up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{6, 9, 1, 4}}));
  // A join takes every held hit up, and nothing is held until it ends.
  agg.add(hits(1, 10, {{6, 11}}), t);
  v1::RequestList join;
  join.set_sender_rank(3);
  join.set_ranks_end(4);
  join.add_requests()->set_op(v1::OP_TYPE_JOIN);
  join.mutable_requests(0)->set_request_rank(3);
  agg.add(join, t);
  agg.add(hits(2, 10, {{6, 11}}), t);
  up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{6, 11, 1, 2}, {6, 11, 2, 3}}));
  agg.join_ended();
  agg.add(hits(1, 12, {{6, 12}}), t);
  EXPECT_FALSE(agg.take(t));
}

TEST(hit_aggregator, hits_after_a_full_request_of_their_round_are_not_held) {
  const auto t = clock_type::now();
  static const std::string x = "x", y = "y";
  hit_aggregator agg(inner_node(), 1s, [](uint32_t id, uint64_t) -> const std::string* {
    return id == 5 ? &x : &y;
  });
  // Rank 2 sends x in full after applying 9 lists; the others' hits name
  // list 9 (this round): rank 2 will not hit it, so they go up at once.
  v1::RequestList full;
  full.set_sender_rank(2);
  full.set_ranks_end(3);
  full.set_lists_applied(9);
  full.add_requests()->set_tensor_name("x");
  full.mutable_requests(0)->set_request_rank(2);
  agg.add(full, t);
  agg.add(hits(1, 9, {{5, 9}, {6, 9}}), t);
  agg.add(hits(3, 9, {{5, 9}}), t);
  auto up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->requests(0).tensor_name(), "x");
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 9, 1, 2}, {5, 9, 3, 4}}));
  EXPECT_EQ(agg.held(), 1u);  // y
  // The next round of x names the list that ran this one: held again.
  agg.add(hits(1, 12, {{5, 12}}), t);
  EXPECT_FALSE(agg.take(t));
  EXPECT_EQ(agg.held(), 2u);
}

TEST(hit_aggregator, a_rank_named_twice_is_not_counted_twice) {
  const auto t = clock_type::now();
  hit_aggregator agg(inner_node(), 1s);
  agg.add(hits(1, 9, {{5, 9}}), t);
  agg.add(hits(2, 9, {{5, 9}}), t);
  agg.add(hits(2, 9, {{5, 9}}), t);  // a broken peer: rank 2 again
  auto up = agg.take(t);
  ASSERT_TRUE(up);
  // Not one hit for [1, 4): what came goes up, and the coordinator's table
  // names rank 2 asking twice.
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 9, 1, 3}, {5, 9, 2, 3}}));
  coordinator::message_table table(4);
  coordinator::response_cache cache(4, 4);
  coordinator::requests by_rank;
  for (int32_t r = 0; r < 4; ++r) {
    v1::Request req;
    req.set_tensor_name("x");
    req.set_request_rank(r);
    req.set_op(v1::OP_TYPE_ALLREDUCE);
    req.add_shape(1);
    by_rank.push_back(std::make_shared<const v1::Request>(req));
  }
  ASSERT_EQ(cache.put("x", by_rank, 9), 1u);
  up->set_lists_applied(9);
  for (auto& r : *up->mutable_requests())
    r.set_cache_id(1);
  const auto ignored = coordinator::take_requests(*up, table, cache);
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_EQ(ignored[0], "rank 2 requested 'x' twice before it completed");
}

TEST(hit_aggregator, hits_held_past_the_hold_go_up_for_the_stall_inspector) {
  const auto t = clock_type::now();
  hit_aggregator agg(inner_node(), 1s);
  agg.add(hits(1, 9, {{5, 9}}), t);
  agg.add(hits(3, 9, {{5, 9}}), t + 10ms);
  ASSERT_TRUE(agg.next_deadline());
  EXPECT_EQ(*agg.next_deadline(), t + 1s);
  EXPECT_FALSE(agg.take(t + 999ms));
  auto up = agg.take(t + 1s);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 9, 1, 2}, {5, 9, 3, 4}}));
  // Counted and reported: the node cannot name id 5, and rank 2 is missing.
  EXPECT_EQ(agg.take_counts().expired, 1u);
  const auto late = agg.take_late();
  ASSERT_TRUE(late);
  EXPECT_EQ(late->tensor, "cache id 5");
  EXPECT_EQ(late->missing, (std::vector<std::pair<int32_t, int32_t>>{{2, 3}}));
  agg.add(hits(2, 9, {{5, 9}}), t + 2s);  // the late rank: straight up
  up = agg.take(t + 2s);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 9, 2, 3}}));
}

TEST(hit_aggregator, members_a_list_behind_are_never_merged_with_the_others) {
  const auto t = clock_type::now();
  hit_aggregator agg(inner_node(), 1s);
  // Rank 3 has not applied list 9, which gave id 5 to another tensor.
  agg.add(hits(1, 9, {{5, 9}}), t);
  agg.add(hits(2, 9, {{5, 9}}), t);
  agg.add(hits(3, 8, {{5, 4}}), t);
  EXPECT_FALSE(agg.take(t));
  auto up = agg.take(t + 1s);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{5, 9, 1, 3}, {5, 4, 3, 4}}));
}

TEST(hit_aggregator, it_reports_the_least_progress_of_its_subtree_and_of_what_it_holds) {
  const auto t = clock_type::now();
  hit_aggregator agg(inner_node(), 1s);
  agg.add(hits(1, 20, {}), t);
  agg.add(hits(2, 30, {}), t);
  agg.add(hits(3, 26, {{7, 18}}), t);
  agg.add(hits(1, 40, {}), t);
  agg.add(hits(2, 41, {}), t);
  agg.add(hits(3, 42, {}), t);
  EXPECT_FALSE(agg.take(t));  // progress alone is not worth a message
  agg.add(hits(1, 43, {{8, 43}}), t);
  agg.add(hits(2, 45, {{8, 43}}), t);
  agg.add(hits(3, 44, {{8, 43}}), t);
  // Rank 3's held hit still names the state after list 18, as its sender
  // saw it after 26 lists: the coordinator must keep what that needs.
  auto up = agg.take(t);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{8, 43, 1, 4}}));
  EXPECT_EQ(up->lists_applied(), 26u);
  // Once it goes up (the hits of a list are resolved before its progress
  // is recorded), the subtree's least progress is the news.
  up = agg.take(t + 2s);
  ASSERT_TRUE(up);
  EXPECT_EQ(hits_in(*up), (std::vector<hit_up>{{7, 18, 3, 4}}));
  EXPECT_EQ(up->lists_applied(), 43u);
}

} // namespace
} // namespace troupe::control
