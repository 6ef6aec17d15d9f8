#include "control/request_merger.hpp"

#include <gtest/gtest.h>

namespace troupe::control {
namespace {

using namespace std::chrono_literals;
using clock_type = request_merger::clock;

// Set ranks [first, end) asking for an allreduce of `name` of `length`.
v1::Request request(int32_t first, int32_t end, const std::string& name = "x",
                    int64_t length = 4) {
  v1::Request r;
  r.set_request_rank(first);
  if (end > first + 1)
    r.set_hit_ranks_end(end);
  r.set_tensor_name(name);
  r.set_op(v1::OP_TYPE_ALLREDUCE);
  r.set_dtype(v1::DATA_TYPE_FLOAT32);
  r.add_shape(length);
  return r;
}

// (first rank, end, first dimension) of each request in `list`.
std::vector<std::tuple<int32_t, int32_t, int64_t>> ranges(const v1::RequestList& list) {
  std::vector<std::tuple<int32_t, int32_t, int64_t>> out;
  for (const auto& r : list.requests())
    out.emplace_back(r.request_rank(),
                     r.hit_ranks_end() > 0 ? r.hit_ranks_end() : r.request_rank() + 1,
                     r.shape(0));
  return out;
}

using expected = std::vector<std::tuple<int32_t, int32_t, int64_t>>;

// A node at set rank 3 whose subtree is [3, 7): its member, rank 4, and a
// child holding [5, 7).
TEST(request_merger, equal_requests_of_the_whole_subtree_go_up_as_one) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  m.add(request(4, 5), t, up);
  m.add(request(5, 7), t, up);  // a child's merged range
  EXPECT_EQ(up.requests_size(), 0);
  EXPECT_EQ(m.held(), 1u);
  m.add(request(3, 4), t, up);
  EXPECT_EQ(ranges(up), (expected{{3, 7, 4}}));
  EXPECT_EQ(up.requests(0).tensor_name(), "x");
  EXPECT_TRUE(m.idle());
  const auto sent = m.take_counts();
  EXPECT_EQ(sent.merged, 1u);
  EXPECT_EQ(sent.passed, 0u);
  // The next round is merged again.
  up.Clear();
  for (int32_t r = 3; r < 7; ++r)
    m.add(request(r, r + 1, "x", 8), t, up);
  EXPECT_EQ(ranges(up), (expected{{3, 7, 8}}));
}

// Each rank's tensor on its own GPU: the requests differ only in the
// device ordinal, which the coordinator never reads.
TEST(request_merger, ranks_on_their_own_gpus_are_merged) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  for (int32_t r = 3; r < 7; ++r) {
    auto req = request(r, r + 1);
    req.set_device_kind(v1::DEVICE_KIND_CUDA);
    req.set_device_ordinal(r % 4);
    m.add(req, t, up);
  }
  EXPECT_EQ(ranges(up), (expected{{3, 7, 4}}));
  EXPECT_EQ(up.requests(0).device_kind(), v1::DEVICE_KIND_CUDA);
  // A rank whose tensor is on the CPU is another collective.
  up.Clear();
  for (int32_t r = 3; r < 7; ++r) {
    auto req = request(r, r + 1);
    req.set_device_kind(r == 5 ? v1::DEVICE_KIND_CPU : v1::DEVICE_KIND_CUDA);
    m.add(req, t, up);
  }
  EXPECT_EQ(ranges(up), (expected{{3, 5, 4}, {5, 6, 4}, {6, 7, 4}}));
}

TEST(request_merger, a_differing_request_sends_its_round_up_as_it_came) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  m.add(request(3, 4), t, up);
  m.add(request(4, 5), t, up);
  m.add(request(5, 6, "x", 5), t, up);  // rank 5 disagrees (or an allgather)
  // What was held goes up as one range, then the odd one as it came...
  EXPECT_EQ(ranges(up), (expected{{3, 5, 4}, {5, 6, 5}}));
  // ...and the rest of the round follows at once.
  up.Clear();
  m.add(request(6, 7), t, up);
  EXPECT_EQ(ranges(up), (expected{{6, 7, 4}}));
  EXPECT_TRUE(m.idle());  // every rank of the round was seen
  const auto sent = m.take_counts();
  EXPECT_EQ(sent.merged, 0u);
  EXPECT_EQ(sent.passed, 3u);
  // A rank named twice (a broken peer) is not counted twice either.
  up.Clear();
  m.add(request(3, 5), t, up);
  m.add(request(4, 5), t, up);
  EXPECT_EQ(ranges(up), (expected{{3, 5, 4}, {4, 5, 4}}));
}

TEST(request_merger, the_hold_sends_a_stalled_round_up) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  m.add(request(3, 4), t, up);
  m.add(request(5, 7), t + 100ms, up);
  EXPECT_EQ(m.next_deadline(), t + 1s);
  m.release_due(t + 999ms, up);
  EXPECT_EQ(up.requests_size(), 0);
  EXPECT_FALSE(m.take_late());
  m.release_due(t + 1s, up);
  EXPECT_EQ(ranges(up), (expected{{3, 4, 4}, {5, 7, 4}}));
  EXPECT_FALSE(m.next_deadline());
  // Counted and reported, naming the rank that had not asked.
  EXPECT_EQ(m.take_counts().expired, 1u);
  const auto late = m.take_late();
  ASSERT_TRUE(late);
  EXPECT_EQ(late->tensor, "x");
  EXPECT_EQ(late->missing, (std::vector<std::pair<int32_t, int32_t>>{{4, 5}}));
  EXPECT_FALSE(m.take_late());
  // The missing rank's request follows as it comes; the round is over.
  up.Clear();
  m.add(request(4, 5), t + 1500ms, up);
  EXPECT_EQ(ranges(up), (expected{{4, 5, 4}}));
  EXPECT_TRUE(m.idle());
}

TEST(request_merger, missing_ranges_are_the_gaps_between_what_was_seen) {
  using r = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ(missing_ranges(3, 7, {}), (r{{3, 7}}));
  EXPECT_EQ(missing_ranges(3, 7, {{5, 7}, {3, 4}}), (r{{4, 5}}));
  EXPECT_EQ(missing_ranges(3, 7, {{4, 5}}), (r{{3, 4}, {5, 7}}));
  EXPECT_EQ(missing_ranges(3, 7, {{3, 5}, {5, 7}}), r{});
}

TEST(request_merger, a_rank_asking_again_starts_the_next_round) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  // A round that went up as it came and never saw rank 6 (say it named
  // the tensor by an id the node could not name)...
  m.add(request(3, 4), t, up);
  m.add(request(4, 5, "x", 5), t, up);
  m.add(request(5, 6), t, up);
  EXPECT_EQ(up.requests_size(), 3);
  EXPECT_FALSE(m.idle());
  // ...ends when one of its ranks asks again: the next round is merged.
  up.Clear();
  for (int32_t r = 3; r < 7; ++r)
    m.add(request(r, r + 1), t, up);
  EXPECT_EQ(ranges(up), (expected{{3, 7, 4}}));
  EXPECT_TRUE(m.idle());
}

TEST(request_merger, the_coordinators_answer_ends_a_round_that_cannot_see_every_rank) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  // Ranks 3, 5 and 6 sent this round before they were placed in the tree
  // (straight to the coordinator): only rank 4's reaches the node.
  m.add(request(4, 5), t, up);
  m.release_due(t + 1s, up);
  EXPECT_EQ(ranges(up), (expected{{4, 5, 4}}));
  EXPECT_FALSE(m.idle());
  m.answered("x", up);
  EXPECT_TRUE(m.idle());
  // The next round, the node's own member first, is merged: without the
  // answer rank 3's request would have completed the stale round, and
  // this one would wait for the hold, and so on every round after it.
  up.Clear();
  for (int32_t r = 3; r < 7; ++r)
    m.add(request(r, r + 1), t + 1100ms, up);
  EXPECT_EQ(ranges(up), (expected{{3, 7, 4}}));
  EXPECT_TRUE(m.idle());
}

TEST(request_merger, requests_held_when_the_answer_comes_go_up) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  m.add(request(3, 4), t, up);
  m.add(request(5, 7), t, up);
  m.answered("y", up);  // another tensor's answer changes nothing
  EXPECT_EQ(m.held(), 1u);
  // An error the coordinator decided without them: the coordinator sees
  // them as in a star, and the round is over.
  m.answered("x", up);
  EXPECT_EQ(ranges(up), (expected{{3, 4, 4}, {5, 7, 4}}));
  EXPECT_EQ(m.held(), 0u);
  EXPECT_TRUE(m.idle());
  EXPECT_FALSE(m.next_deadline());
}

TEST(request_merger, ranks_that_named_the_tensor_by_id_end_the_wait) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  const std::string x = "x";
  m.add(request(3, 4), t, up);
  m.arrived(&x, up);  // a hit for x reached the node
  EXPECT_EQ(ranges(up), (expected{{3, 4, 4}}));
  m.hits(x, 5, 7, up);  // ranks 5 and 6 went up as hits
  up.Clear();
  m.add(request(4, 5), t, up);
  EXPECT_EQ(ranges(up), (expected{{4, 5, 4}}));
  EXPECT_TRUE(m.idle());  // every rank of the round was seen
  // Hits first: the round's requests are not held.
  up.Clear();
  m.hits(x, 3, 4, up);
  m.add(request(4, 5), t, up);
  EXPECT_EQ(ranges(up), (expected{{4, 5, 4}}));
  // A hit the node cannot name may be any tensor's: every held round goes up.
  up.Clear();
  m.add(request(3, 4, "y"), t, up);
  m.add(request(3, 4, "z"), t, up);
  m.arrived(nullptr, up);
  EXPECT_EQ(up.requests_size(), 2);
  EXPECT_EQ(m.held(), 0u);
  // Hits the node could not name went up beside a request for "w": its
  // round goes up as it comes.
  up.Clear();
  m.mixed("w", up);
  m.add(request(3, 4, "w"), t, up);
  EXPECT_EQ(ranges(up), (expected{{3, 4, 4}}));
}

// An internal collective's deadline runs from the first request the
// coordinator sees: such requests are not held.
TEST(request_merger, requests_with_a_deadline_go_up_as_they_came) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  auto req = request(3, 4, "registration");
  req.set_deadline_ms(30000);
  m.add(req, t, up);
  EXPECT_EQ(ranges(up), (expected{{3, 4, 4}}));
  EXPECT_TRUE(m.idle());
}

TEST(request_merger, requests_outside_the_subtree_go_up_as_they_came) {
  const auto t = clock_type::now();
  request_merger m(3, 7, 1s);
  v1::RequestList up;
  m.add(request(2, 4), t, up);
  m.add(request(6, 8), t, up);
  EXPECT_EQ(ranges(up), (expected{{2, 4, 4}, {6, 8, 4}}));
  EXPECT_TRUE(m.idle());
}

} // namespace
} // namespace troupe::control
