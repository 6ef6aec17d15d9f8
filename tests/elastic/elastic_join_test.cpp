// An elastic worker's side of troupe-run's plan: await_seat against an
// embedded store, and when a worker whose planned epoch did not start
// moves on to the next one (retry_next_epoch).
#include "elastic/elastic_plan.hpp"
#include "elastic/embedded_store.hpp"
#include "elastic/membership_epoch.hpp"
#include "workers/elastic_join.hpp"
#include "workers/runtime_bootstrap.hpp"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace troupe::workers {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

const std::string secret = "elastic-join-test-secret-0123456";

struct fixture {
  elastic::store_server server{"127.0.0.1", 0, secret};

  std::unique_ptr<elastic::embedded_store_client> client() {
    return std::make_unique<elastic::embedded_store_client>("127.0.0.1", server.port(), secret,
                                                            5s);
  }
};

void publish(elastic::store_client& store, int64_t epoch, const elastic::membership_plan& plan) {
  store.set(elastic::plan_key("job", epoch), elastic::encode_plan(plan));
  store.set(elastic::epoch_key("job"), std::to_string(epoch));
}

// A missing peer moves a worker on to the next epoch once; its own failure
// (or a second epoch in a row that does not start) is returned, so that
// troupe-run blacklists its host instead of planning epochs forever.
TEST(elastic_join, a_worker_moves_past_an_epoch_only_for_a_missing_peer_and_once) {
  int asked = 0;
  const auto open = [&asked] { return ++asked, true; };
  const auto closed = [&asked] { return ++asked, false; };
  for (auto code : {status_code::reset, status_code::timeout, status_code::peer_lost}) {
    EXPECT_TRUE(retry_next_epoch({code, "a peer is missing"}, 1, closed));
    EXPECT_FALSE(retry_next_epoch({code, "a peer is missing"}, max_failed_epochs, open));
  }
  EXPECT_EQ(asked, 0);  // troupe-run is asked only when the code does not say
  // A backend that cannot start: this host's, unless troupe-run already
  // gave the epoch up (a peer's death broke the backend's rendezvous).
  EXPECT_FALSE(retry_next_epoch({status_code::backend, "/dev/shm is full"}, 1, closed));
  EXPECT_TRUE(retry_next_epoch({status_code::backend, "connection reset"}, 1, open));
  EXPECT_FALSE(retry_next_epoch({status_code::internal, "?"}, 1, closed));
  EXPECT_EQ(asked, 3);
  EXPECT_FALSE(retry_next_epoch({status_code::backend, "/dev/shm is full"}, 2, open));
  EXPECT_FALSE(retry_next_epoch({status_code::invalid_argument, "rank 1 twice"}, 1, open));
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(max_failed_epochs, 2);
}

// The ranks a worker lost belong to the epoch before `first`: arriving at
// a later epoch's barrier, it must not name them (other workers hold those
// ranks there).
TEST(elastic_join, lost_ranks_are_told_at_the_first_epoch_only) {
  fixture f;
  auto store = f.client();
  publish(*store, 3, {{0, "a"}, {7, "b"}});
  elastic_seat seat;
  auto s = await_seat(*store, "job", 7, 1, {true, {2}}, clock::now() + 5s, seat);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(seat.epoch, 3);
  EXPECT_FALSE(seat.removed);
  const auto first = elastic::decode_arrival(*store->get(elastic::arrive_key("job", 1, 7)));
  EXPECT_TRUE(first.veteran);
  EXPECT_EQ(first.lost, std::vector<int>{2});
  const auto later = elastic::decode_arrival(*store->get(elastic::arrive_key("job", 3, 7)));
  EXPECT_TRUE(later.veteran);
  EXPECT_TRUE(later.lost.empty());
}

} // namespace
} // namespace troupe::workers
