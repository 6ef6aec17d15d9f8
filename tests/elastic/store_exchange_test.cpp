#include "elastic/embedded_store.hpp"
#include "elastic/store_exchange.hpp"

#include <gtest/gtest.h>

#include <future>
#include <thread>

using namespace troupe::elastic;
using namespace std::chrono_literals;

namespace {

const std::string secret = "store-exchange-test-secret-0123";

struct fixture {
  store_server server{"127.0.0.1", 0, secret};

  std::unique_ptr<embedded_store_client> client() {
    return std::make_unique<embedded_store_client>("127.0.0.1", server.port(), secret, 5s);
  }
};

std::string entry(int from, int to) {
  return std::to_string(from) + "->" + std::to_string(to) + std::string(1, '\0') + "\xff";
}

} // namespace

TEST(store, set_many_sets_every_key_in_one_request) {
  fixture f;
  auto c = f.client();
  c->set_many({{"m/a", "1"}, {"m/b", std::string("\0x", 2)}, {"m/a", "3"}});
  EXPECT_EQ(c->list_values("m/"),
            (std::map<std::string, std::string>{{"m/a", "3"}, {"m/b", std::string("\0x", 2)}}));
  c->set_many({});
  EXPECT_EQ(c->list("m/").size(), 2u);
}

TEST(store_exchange, all_to_all_gives_each_rank_what_every_peer_addressed_to_it) {
  fixture f;
  for (int size : {1, 2, 7}) {
    std::vector<std::future<std::vector<std::string>>> ranks;
    for (int rank = 0; rank < size; ++rank)
      ranks.push_back(std::async(std::launch::async, [&f, rank, size] {
        auto c = f.client();
        std::vector<std::string> to_peer(size);
        for (int peer = 0; peer < size; ++peer)
          to_peer[peer] = entry(rank, peer);
        // Ranks 10 and up would sort before 2 under the prefix: parse, not order.
        return all_to_all(*c, "job/mesh" + std::to_string(size) + "/", rank, size, to_peer, 5s);
      }));
    for (int rank = 0; rank < size; ++rank) {
      auto got = ranks[rank].get();
      ASSERT_EQ(got.size(), static_cast<size_t>(size));
      for (int peer = 0; peer < size; ++peer)
        EXPECT_EQ(got[peer], peer == rank ? "" : entry(peer, rank))
          << "rank " << rank << " from " << peer << " of " << size;
    }
  }
}

// Ring neighbours' entries only (each rank to the next): the others are
// empty and stored as nothing.
TEST(store_exchange, a_sparse_all_to_all_stores_and_delivers_only_its_entries) {
  fixture f;
  constexpr int size = 5;
  std::vector<std::future<std::vector<std::string>>> ranks;
  for (int rank = 0; rank < size; ++rank)
    ranks.push_back(std::async(std::launch::async, [&f, rank] {
      auto c = f.client();
      std::vector<std::string> to_peer(size);
      to_peer[(rank + 1) % size] = entry(rank, (rank + 1) % size);
      return all_to_all(*c, "job/ring/", rank, size, to_peer, 5s);
    }));
  for (int rank = 0; rank < size; ++rank) {
    const auto got = ranks[rank].get();
    const int left = (rank + size - 1) % size;
    for (int peer = 0; peer < size; ++peer)
      EXPECT_EQ(got[peer], peer == left ? entry(left, rank) : "")
        << "rank " << rank << " from " << peer;
  }
  EXPECT_EQ(f.client()->list("job/ring/to/").size(), static_cast<size_t>(size));
}

TEST(store_exchange, a_missing_rank_times_out_naming_how_many_arrived) {
  fixture f;
  auto a = f.client();
  auto b = f.client();
  auto other = std::async(std::launch::async, [&] {
    return all_to_all(*b, "job/x/", 1, 3, {"a", "b", "c"}, 300ms);
  });
  try {
    all_to_all(*a, "job/x/", 0, 3, {"a", "b", "c"}, 300ms);
    FAIL() << "rank 2 never arrived";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("only 2 of 3 ranks arrived at 'job/x/'"),
              std::string::npos)
      << e.what();
  }
  EXPECT_THROW(other.get(), store_error);
}

TEST(store_exchange, entries_for_another_size_are_refused) {
  fixture f;
  auto c = f.client();
  EXPECT_THROW(all_to_all(*c, "job/y/", 0, 3, {"a", "b"}, 100ms), std::invalid_argument);
}

TEST(store_exchange, a_stray_key_in_a_mailbox_fails_the_exchange_naming_it) {
  fixture f;
  auto c = f.client();
  c->set("job/z/to/0/zz", "forged");
  try {
    all_to_all(*c, "job/z/", 0, 1, {""}, 1s);
    FAIL() << "the stray key was accepted";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("job/z/to/0/zz"), std::string::npos) << e.what();
  }
}

// Elastic bootstrap: a rank that died before publishing never arrives, and
// troupe-run opening the next reset barrier says so. The others give the
// exchange up within a slice of the wait, not at its timeout (which can be
// past the barrier's deadline).
TEST(store_exchange, a_gather_watching_an_abandon_key_gives_up_once_it_appears) {
  fixture f;
  auto a = f.client();
  auto driver = f.client();
  a->set("job/ep/0", "x");
  const auto began = std::chrono::steady_clock::now();
  auto setter = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(300ms);
    driver->set("job/barrier/1", "a worker failed");
  });
  try {
    gather_published(*a, "job/ep/", "job/arrived/", 2, 20s, std::string("job/barrier/1"));
    FAIL() << "rank 1 never arrived";
  } catch (const exchange_abandoned& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("only 1 of 2 ranks arrived at 'job/arrived/'"), std::string::npos)
      << what;
    EXPECT_NE(what.find("'job/barrier/1' appeared: a worker failed"), std::string::npos) << what;
  }
  setter.get();
  EXPECT_LT(std::chrono::steady_clock::now() - began, 3s);
}

TEST(store_exchange, a_gather_that_completes_ignores_its_abandon_key) {
  fixture f;
  auto a = f.client();
  a->set("job/ep/0", "x");
  a->set("job/barrier/1", "a worker left");
  EXPECT_EQ(gather_published(*a, "job/ep/", "job/arrived/", 1, 1s,
                             std::string("job/barrier/1")),
            std::vector<std::string>{"x"});
}

TEST(store_exchange, a_gather_watching_an_absent_abandon_key_times_out_as_before) {
  fixture f;
  auto a = f.client();
  a->set("job/ep/0", "x");
  const auto began = std::chrono::steady_clock::now();
  try {
    gather_published(*a, "job/ep/", "job/arrived/", 2, 400ms, std::string("job/barrier/1"));
    FAIL() << "rank 1 never arrived";
  } catch (const exchange_abandoned& e) {
    FAIL() << "abandoned without the key: " << e.what();
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("only 1 of 2 ranks arrived at 'job/arrived/' within "
                                         "400 ms"),
              std::string::npos)
      << e.what();
  }
  const auto took = std::chrono::steady_clock::now() - began;
  EXPECT_GE(took, 400ms);
  EXPECT_LT(took, 3s);
}
