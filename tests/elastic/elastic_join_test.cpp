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

// A missing peer always moves a worker on to the next epoch; a failure of
// its own is returned (or, the second time, even one troupe-run's open
// barrier blamed on a peer), so that troupe-run blacklists its host instead
// of planning epochs forever.
TEST(elastic_join, a_worker_moves_past_an_epoch_for_a_missing_peer_and_its_own_failure_once) {
  int asked = 0;
  const auto open = [&asked] { return ++asked, true; };
  const auto closed = [&asked] { return ++asked, false; };
  int own = 0;
  for (int epoch = 0; epoch < 5; ++epoch)
    for (auto code : {status_code::reset, status_code::timeout, status_code::peer_lost})
      EXPECT_TRUE(retry_next_epoch({code, "a peer is missing"}, own, closed));
  EXPECT_EQ(asked, 0);  // troupe-run is asked only when the code does not say
  EXPECT_EQ(own, 0);    // and peers' failures do not count
  EXPECT_FALSE(retry_next_epoch({status_code::invalid_argument, "rank 1 twice"}, own, open));
  EXPECT_EQ(asked, 0);
  // A backend that cannot start: this host's, unless troupe-run gave the
  // epoch up (a peer's death broke the backend's rendezvous).
  own = 0;
  EXPECT_FALSE(retry_next_epoch({status_code::backend, "/dev/shm is full"}, own, closed));
  own = 0;
  EXPECT_TRUE(retry_next_epoch({status_code::backend, "connection reset"}, own, open));
  EXPECT_EQ(asked, 2);
  // The second such failure is returned without asking.
  EXPECT_FALSE(retry_next_epoch({status_code::internal, "?"}, own, open));
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(own, max_failed_epochs);
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

// troupe-run writes a plan, then the epoch that names it; when the epoch's
// write fails, it writes both again on the retry, maybe with another plan.
// A worker takes the plan only once the epoch names it: before, it took
// the first plan as soon as its key appeared, and workers could disagree.
TEST(elastic_join, a_plan_counts_once_the_epoch_names_it) {
  fixture f;
  auto store = f.client();
  publish(*store, 0, {{0, "a"}, {1, "b"}});
  store->set(elastic::plan_key("job", 1), elastic::encode_plan({{0, "a"}, {1, "b"}}));
  auto joined = std::async(std::launch::async, [&f] {
    auto c = f.client();
    elastic_seat seat;
    auto s = await_seat(*c, "job", 1, 1, {true, {}}, clock::now() + 5s, seat);
    return std::make_pair(s, seat);
  });
  EXPECT_EQ(joined.wait_for(300ms), std::future_status::timeout);
  publish(*store, 1, {{1, "b"}, {2, "c"}});
  auto [s, seat] = joined.get();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(seat.epoch, 1);
  EXPECT_EQ(seat.plan, (elastic::membership_plan{{1, "b"}, {2, "c"}}));
  EXPECT_EQ(seat.layout.rank, 0);
}

// A plan whose epoch never comes is waited for up to the deadline only.
TEST(elastic_join, a_plan_without_its_epoch_times_out_at_the_deadline) {
  fixture f;
  auto store = f.client();
  publish(*store, 0, {{0, "a"}});
  store->set(elastic::plan_key("job", 1), elastic::encode_plan({{0, "a"}}));
  elastic_seat seat;
  const auto start = clock::now();
  auto s = await_seat(*store, "job", 0, 1, {true, {}}, start + 400ms, seat);
  EXPECT_EQ(s.code(), status_code::timeout) << s.message();
  EXPECT_NE(s.message().find("no membership plan for epoch 1 in time"), std::string::npos)
    << s.message();
  EXPECT_GE(clock::now() - start, 400ms);
  EXPECT_LT(clock::now() - start, 2s);
}

// shutdown() during an elastic reset: the wait for a plan that troupe-run
// has not published ends within 250 ms of the stop, not at the
// deadline (TROUPE_ELASTIC_TIMEOUT + TROUPE_RESET_TIMEOUT, 660 s by default).
TEST(elastic_join, a_stop_ends_the_wait_for_a_plan) {
  fixture f;
  auto store = f.client();
  publish(*store, 0, {{0, "a"}});
  std::atomic<bool> stop{false};
  auto stopper = std::async(std::launch::async, [&stop] {
    std::this_thread::sleep_for(300ms);
    stop = true;
  });
  elastic_seat seat;
  const auto start = clock::now();
  auto s = await_seat(*store, "job", 0, 1, {true, {}}, start + 60s, seat, &stop);
  stopper.get();
  EXPECT_EQ(s.code(), status_code::shut_down) << s.message();
  EXPECT_NE(s.message().find("shutdown() was called while this worker waited for troupe-run's "
                             "membership plan for epoch 1"),
            std::string::npos)
    << s.message();
  EXPECT_GE(clock::now() - start, 300ms);
  EXPECT_LT(clock::now() - start, 5s);  // the deadline is 60 s
}

} // namespace
} // namespace troupe::workers
