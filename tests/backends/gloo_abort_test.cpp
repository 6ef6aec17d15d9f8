// Gloo's abort: a collective waiting for a peer that never takes part (a
// frozen rank) fails as soon as another thread aborts the communicator, not
// at Gloo's timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/gloo/gloo_communicator.hpp"
#include "elastic/embedded_store.hpp"

namespace troupe::backends {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

const std::string secret = "gloo-abort-test-secret-0123456789";

class gloo_abort_test : public ::testing::Test {
protected:
  // Two connected ranks whose collectives would wait 30 s for each other.
  void SetUp() override {
    std::vector<std::future<void>> connecting;
    for (int rank = 0; rank < 2; ++rank) {
      backend_context ctx;
      ctx.rank = rank;
      ctx.size = 2;
      ctx.advertise_host = "127.0.0.1";
      ctx.store =
        std::make_shared<elastic::embedded_store_client>("127.0.0.1", store_.port(), secret, 5s);
      ctx.store_prefix = "abort-test/";
      ctx.timeout = 30s;
      ranks_.push_back(std::make_unique<gloo_communicator>(ctx));
      connecting.push_back(
        std::async(std::launch::async, [c = ranks_.back().get()] { c->connect(); }));
    }
    for (auto& c : connecting)
      c.get();
  }

  // Seconds from the start of the abort, made by another thread after
  // `delay`, until rank 0's allreduce of `data` returns; the allreduce must
  // throw backend_error naming the abort.
  double allreduce_aborted_after(std::vector<float>& data, std::chrono::milliseconds delay) {
    auto aborter = std::async(std::launch::async, [&] {
      std::this_thread::sleep_for(delay);
      const auto start = clock::now();
      ranks_[0]->abort();
      return start;
    });
    allreduce_options opts;
    opts.data = data.data();
    opts.count = data.size();
    std::string error;
    try {
      ranks_[0]->allreduce(opts);
    } catch (const backend_error& e) {
      error = e.what();
    }
    const auto returned = clock::now();
    const auto aborted = aborter.get();
    EXPECT_NE(error.find("aborted"), std::string::npos) << "error: '" << error << "'";
    return std::chrono::duration<double>(returned - aborted).count();
  }

  elastic::store_server store_{"127.0.0.1", 0, secret};
  std::vector<std::unique_ptr<gloo_communicator>> ranks_;
};

TEST_F(gloo_abort_test, an_allreduce_waiting_for_a_silent_peer_fails_at_the_abort) {
  // Rank 1 never joins: rank 0 waits for its part, as for a frozen rank.
  std::vector<float> data(1 << 20, 1.0f);
  const double after = allreduce_aborted_after(data, 300ms);
  EXPECT_GT(after, 0.0);  // it waited for the abort, not for anything else
  EXPECT_LT(after, 2.0);
  // The communicator is unusable afterwards: the next call fails at once.
  allreduce_options opts;
  opts.data = data.data();
  opts.count = data.size();
  const auto start = clock::now();
  EXPECT_THROW(ranks_[0]->allreduce(opts), backend_error);
  EXPECT_LT(clock::now() - start, 1s);
}

TEST_F(gloo_abort_test, an_abort_before_the_call_fails_it_at_once) {
  ranks_[0]->abort();
  ranks_[0]->abort();  // a second abort changes nothing
  std::vector<float> data(16, 1.0f);
  const double after = allreduce_aborted_after(data, 0ms);
  EXPECT_LT(after, 1.0);
}

} // namespace
} // namespace troupe::backends
