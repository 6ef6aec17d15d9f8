// Gloo's abort: a collective waiting for a peer that never takes part (a
// frozen rank) fails as soon as another thread aborts the communicator, not
// at Gloo's timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "backends/gloo/gloo_communicator.hpp"
#include "backends/shm/shm_communicator.hpp"
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
    connect_ranks(2);
  }

  void connect_ranks(int size) {
    ranks_.clear();
    std::vector<std::future<void>> connecting;
    for (int rank = 0; rank < size; ++rank) {
      backend_context ctx;
      ctx.rank = rank;
      ctx.size = size;
      ctx.advertise_host = "127.0.0.1";
      ctx.store =
        std::make_shared<elastic::embedded_store_client>("127.0.0.1", store_.port(), secret, 5s);
      ctx.store_prefix = "abort-test/" + std::to_string(size) + "/";
      ctx.timeout = 30s;
      ranks_.push_back(std::make_unique<gloo_communicator>(ctx));
      connecting.push_back(
        std::async(std::launch::async, [c = ranks_.back().get()] { c->connect(); }));
    }
    for (auto& c : connecting)
      c.get();
  }

  // Seconds from the start of the abort, made by another thread after
  // `delay`, until rank 0's allreduce (ring_allreduce with `ring`) of
  // `data` returns; the call must throw backend_error naming the abort.
  double allreduce_aborted_after(std::vector<float>& data, std::chrono::milliseconds delay,
                                 bool ring = false) {
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
      if (ring)
        ranks_[0]->ring_allreduce(opts);
      else
        ranks_[0]->allreduce(opts);
    } catch (const backend_error& e) {
      error = e.what();
    }
    const auto returned = clock::now();
    const auto aborted = aborter.get();
    EXPECT_NE(error.find("aborted"), std::string::npos) << "error: '" << error << "'";
    return std::chrono::duration<double>(returned - aborted).count();
  }

  // Runs `check` for ranks 0 .. size - 1 at once, each on a thread of its
  // own; each must return "" (else what went wrong).
  static void on_every_rank(int size, const std::function<std::string(int)>& check) {
    std::vector<std::future<std::string>> runs;
    for (int rank = 0; rank < size; ++rank)
      runs.push_back(std::async(std::launch::async, check, rank));
    for (int rank = 0; rank < size; ++rank)
      EXPECT_EQ(runs[rank].get(), "") << "rank " << rank;
  }

  // "" where every element of `got` is want(i), else `what` and the first
  // element that is not.
  template <class T, class F>
  static std::string first_wrong(const std::vector<T>& got, F want, const std::string& what) {
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want(i))
        return what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]);
    return "";
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

TEST_F(gloo_abort_test, a_small_allreduce_waiting_for_a_silent_peer_fails_at_the_abort) {
  // Small enough for one exchange of whole buffers (direct_allreduce).
  std::vector<float> data(16, 1.0f);
  const double after = allreduce_aborted_after(data, 300ms);
  EXPECT_GT(after, 0.0);
  EXPECT_LT(after, 2.0);
}

// Small allreduces go as one exchange of whole buffers, large ones around a
// ring: calls of both kinds in a row, on 3 ranks, with values whose float
// sum depends on the order it is taken in. Every rank must hold the sum in
// rank order, bit for bit, in every call.
TEST_F(gloo_abort_test, small_and_large_allreduces_hold_the_same_bits_on_every_rank) {
  connect_ranks(3);
  const float values[3] = {1.0f, 1e8f, -1e8f};
  const float in_rank_order = (values[0] + values[1]) + values[2];
  ASSERT_NE(in_rank_order, values[0] + (values[1] + values[2]));  // the order shows
  const std::vector<size_t> counts = {1, 7, 4096, 1 << 16, 3, 8192 + 1, 1};
  std::vector<std::future<std::vector<std::vector<float>>>> runs;
  for (int rank = 0; rank < 3; ++rank)
    runs.push_back(std::async(std::launch::async, [&, rank] {
      std::vector<std::vector<float>> results;
      for (auto count : counts) {
        std::vector<float> data(count, values[rank]);
        allreduce_options opts;
        opts.data = data.data();
        opts.count = count;
        opts.dtype = data_type::float32;
        if (count % 2 == 1)
          ranks_[rank]->ring_allreduce(opts);
        else
          ranks_[rank]->allreduce(opts);
        results.push_back(std::move(data));
      }
      return results;
    }));
  std::vector<std::vector<std::vector<float>>> results;
  for (auto& r : runs)
    results.push_back(r.get());
  for (size_t call = 0; call < counts.size(); ++call) {
    // Small calls reduce in rank order everywhere; large ones as the ring
    // does, each chunk on one rank: the same bits on every rank either way.
    for (int rank = 1; rank < 3; ++rank) {
      EXPECT_EQ(0, std::memcmp(results[0][call].data(), results[rank][call].data(),
                               counts[call] * sizeof(float)))
        << "call " << call << " (" << counts[call] << " floats), rank " << rank;
    }
    if (counts[call] * sizeof(float) * 2 <= (size_t{64} << 10)) {
      EXPECT_EQ(results[0][call].front(), in_rank_order) << "call " << call;
    }
  }
}

// Allgathers, broadcasts and barriers, small and large, in a row on 3 ranks
// (the links; broadcasts of more than 64 KiB along the chain), parts of
// different sizes (one empty), broadcasts from every root.
TEST_F(gloo_abort_test, small_and_large_allgathers_broadcasts_and_barriers_deliver) {
  connect_ranks(3);
  // Allgathers of 20 B, 40 KiB, 160 KiB and 1 MB; broadcasts of 12 B, 24
  // KiB (from the root to each), 96 KiB and 600 KB (a chain of one and of
  // three segments, the last a short one).
  const std::vector<size_t> scales = {1, 2048, 8192, 50000};
  on_every_rank(3, [&](int rank) -> std::string {
    auto& c = *ranks_[rank];
    for (auto scale : scales) {
      const std::vector<size_t> counts = {2 * scale, 0, 3 * scale};
      std::vector<float> mine(counts[rank], static_cast<float>(rank + 1));
      std::vector<float> all(5 * scale, -1.0f);
      allgather_options g;
      g.input = mine.data();
      g.output = all.data();
      g.counts = counts;
      c.allgather(g);
      if (auto wrong = first_wrong(
            all, [&](size_t i) { return i < 2 * scale ? 1.0f : 3.0f; },
            "allgather x" + std::to_string(scale));
          !wrong.empty())
        return wrong;
      c.barrier();
      for (int root = 0; root < 3; ++root) {
        // Every element its own value: a segment out of place shows.
        const auto sent = [root](size_t i) { return static_cast<float>(root * 1000000 + i); };
        std::vector<float> data(3 * scale, 0.0f);
        if (rank == root)
          for (size_t i = 0; i < data.size(); ++i)
            data[i] = sent(i);
        broadcast_options b;
        b.data = data.data();
        b.count = data.size();
        b.root = root;
        c.broadcast(b);
        if (auto wrong = first_wrong(
              data, sent, "broadcast x" + std::to_string(scale) + " from " + std::to_string(root));
            !wrong.empty())
          return wrong;
      }
    }
    return "";
  });
}

// Reducescatters as one exchange (small) and around the ring (large), parts
// of different sizes, one empty, on 3 ranks; then pairwise exchanges of
// unequal sizes (Adasum's), each rank with every other.
TEST_F(gloo_abort_test, reducescatters_and_pairwise_exchanges_deliver) {
  connect_ranks(3);
  on_every_rank(3, [&](int rank) -> std::string {
    auto& c = *ranks_[rank];
    for (size_t scale : {size_t{1}, size_t{16384}}) {  // 24 B / 384 KiB in all
      const std::vector<size_t> counts = {3 * scale, 0, 3 * scale};
      std::vector<float> input(6 * scale);
      for (size_t i = 0; i < input.size(); ++i)
        input[i] = static_cast<float>(rank + 1) * static_cast<float>(i % 7);
      std::vector<float> mine(counts[rank], -1.0f);
      reducescatter_options o;
      o.input = input.data();
      o.output = mine.data();
      o.counts = counts;
      c.reducescatter(o);
      const size_t first = rank == 2 ? 3 * scale : 0;
      if (auto wrong = first_wrong(
            mine, [&](size_t i) { return 6.0f * static_cast<float>((first + i) % 7); },
            "reducescatter x" + std::to_string(scale));
          !wrong.empty())
        return wrong;
    }
    for (int round = 0; round < 3; ++round) {
      // Round r pairs the two ranks whose numbers add up to -r (mod 3);
      // the third sits it out.
      const int peer = (3 - rank - round + 3) % 3;
      if (peer == rank)
        continue;
      std::vector<char> out(static_cast<size_t>(100 * rank + 1), static_cast<char>(rank));
      std::vector<char> in(static_cast<size_t>(100 * peer + 1), -1);
      c.sendrecv(out.data(), out.size(), in.data(), in.size(), peer);
      if (in != std::vector<char>(in.size(), static_cast<char>(peer)))
        return "sendrecv with rank " + std::to_string(peer) + " in round " +
               std::to_string(round);
    }
    return "";
  });
}

// An alltoall over the links on 3 ranks: rank r sends (r + d) % 3 rows of
// 2 ints to rank d (none at times), its own included; every rank learns
// the rows from the senders.
TEST_F(gloo_abort_test, alltoall_rows_over_the_links_deliver_uneven_rows) {
  connect_ranks(3);
  const auto rows = [](int from, int to) { return (from + to) % 3; };
  on_every_rank(3, [&](int rank) -> std::string {
    std::vector<int64_t> send_rows(3);
    std::vector<int32_t> input;
    for (int d = 0; d < 3; ++d) {
      send_rows[d] = rows(rank, d);
      for (int r = 0; r < rows(rank, d); ++r)
        input.insert(input.end(), {rank * 100 + d * 10 + r, -rank});
    }
    std::vector<int64_t> told;
    std::vector<int32_t> out;
    ranks_[rank]->alltoall_rows(input.data(), send_rows, 2 * sizeof(int32_t),
                                [&](const std::vector<int64_t>& recv_rows) {
                                  told = recv_rows;
                                  out.resize(2 * static_cast<size_t>(std::accumulate(
                                                   recv_rows.begin(), recv_rows.end(), 0)));
                                  return static_cast<void*>(out.data());
                                });
    std::vector<int32_t> expected;
    for (int from = 0; from < 3; ++from) {
      if (told.at(from) != rows(from, rank))
        return "rows from rank " + std::to_string(from);
      for (int r = 0; r < rows(from, rank); ++r)
        expected.insert(expected.end(), {from * 100 + rank * 10 + r, -from});
    }
    return out == expected ? "" : "the rows themselves";
  });
}

// A set of more than 8 links ring neighbours only: its rings (allreduce,
// reducescatter, allgather), chains (broadcast, barrier) and neighbours'
// pairwise exchanges go over the links, the rest through Gloo (its
// alltoall, or a pairwise step over Gloo's unbound buffers). One of each
// on 9 ranks.
TEST_F(gloo_abort_test, beyond_8_members_rings_and_chains_go_over_neighbour_links) {
  constexpr int size = 9;
  connect_ranks(size);
  // Each ring step carries at least 128 KiB of a chunk.
  ASSERT_EQ(ranks_[0]->chunk_bytes(), size_t{9} << 17);
  on_every_rank(size, [&](int rank) -> std::string {
    auto& c = *ranks_[rank];
    const float mine = static_cast<float>(rank + 1);
    const float total = size * (size + 1) / 2.0f;
    for (size_t count : {size_t{1}, size_t{40000}}) {
      std::vector<float> a(count, mine), b(count, mine);
      allreduce_options o;
      o.data = a.data();
      o.count = count;
      c.allreduce(o);
      o.data = b.data();
      c.ring_allreduce(o);
      if (a.front() != total || a.back() != total || b.front() != total || b.back() != total)
        return "allreduce of " + std::to_string(count);
    }
    // Reducescatter around the ring: rank r gets r rows (rank 0 none).
    std::vector<size_t> counts(size);
    for (int r = 0; r < size; ++r)
      counts[r] = static_cast<size_t>(r) * 1000;
    std::vector<float> input(size * (size - 1) / 2 * 1000, mine), part(counts[rank], 0.0f);
    reducescatter_options rs;
    rs.input = input.data();
    rs.output = part.data();
    rs.counts = counts;
    c.reducescatter(rs);
    for (auto v : part)
      if (v != total)
        return "reducescatter: " + std::to_string(v);
    std::vector<float> gathered(size, 0.0f);
    allgather_options g;
    g.input = &mine;
    g.output = gathered.data();
    g.counts.assign(size, 1);
    c.allgather(g);
    for (int r = 0; r < size; ++r)
      if (gathered[r] != static_cast<float>(r + 1))
        return "allgather";
    // Uneven parts around the ring, rank 3's empty: rank r gives r * 5000
    // values of r (rank 3 none).
    const auto part_of = [](int r) { return r == 3 ? size_t{0} : static_cast<size_t>(r) * 5000; };
    std::vector<int32_t> own(part_of(rank), rank), all;
    allgather_options ga;
    ga.dtype = data_type::int32;
    ga.input = own.data();
    for (int r = 0; r < size; ++r) {
      ga.counts.push_back(part_of(r));
      all.insert(all.end(), part_of(r), -1);
    }
    std::vector<int32_t> expected_all;
    for (int r = 0; r < size; ++r)
      expected_all.insert(expected_all.end(), part_of(r), r);
    ga.output = all.data();
    c.allgather(ga);
    if (all != expected_all)
      return "uneven allgather";
    // Rank r sends r rows of one int to each member.
    std::vector<int32_t> rows(static_cast<size_t>(rank) * size, rank);
    std::vector<int32_t> received;
    c.alltoall_rows(rows.data(), std::vector<int64_t>(size, rank), sizeof(int32_t),
                    [&](const std::vector<int64_t>& recv_rows) {
                      received.resize(static_cast<size_t>(
                        std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0})));
                      return static_cast<void*>(received.data());
                    });
    std::vector<int32_t> expected;
    for (int r = 0; r < size; ++r)
      expected.insert(expected.end(), static_cast<size_t>(r), r);
    if (received != expected)
      return "alltoall";
    float value = rank == 4 ? 42.0f : 0.0f;
    broadcast_options bo;
    bo.data = &value;
    bo.count = 1;
    bo.root = 4;
    c.broadcast(bo);
    if (value != 42.0f)
      return "broadcast";
    // A chain of three segments from rank 8, around the ring's end.
    std::vector<int32_t> long_one(150000, 0);
    if (rank == 8)
      std::iota(long_one.begin(), long_one.end(), 0);
    bo.dtype = data_type::int32;
    bo.data = long_one.data();
    bo.count = long_one.size();
    bo.root = 8;
    c.broadcast(bo);
    if (auto wrong = first_wrong(
          long_one, [](size_t i) { return static_cast<int32_t>(i); }, "broadcast of 600 KB");
        !wrong.empty())
      return wrong;
    c.barrier();
    // Pairs (0, 1), (2, 3), ... (neighbours, over the links), then (0, 2),
    // (1, 3), ... (through Gloo); rank 8 sits both out.
    for (int distance : {1, 2}) {
      if (rank < 8) {
        const int peer = rank ^ distance;
        int got = -1;
        c.sendrecv(&rank, sizeof rank, &got, sizeof got, peer);
        if (got != peer)
          return "sendrecv at distance " + std::to_string(distance);
      }
    }
    return "";
  });
}

// Past 16 members small broadcasts and barriers go through Gloo's rounds,
// a large broadcast still along the chain; the rings as before.
TEST_F(gloo_abort_test, beyond_16_members_small_broadcasts_and_barriers_go_through_gloo) {
  constexpr int size = 17;
  connect_ranks(size);
  on_every_rank(size, [&](int rank) -> std::string {
    auto& c = *ranks_[rank];
    for (size_t count : {size_t{1}, size_t{100000}}) {
      std::vector<int32_t> data(count, rank == 16 ? 0 : -1);
      if (rank == 16)
        std::iota(data.begin(), data.end(), 7);
      broadcast_options b;
      b.dtype = data_type::int32;
      b.data = data.data();
      b.count = count;
      b.root = 16;
      c.broadcast(b);
      if (auto wrong = first_wrong(
            data, [](size_t i) { return static_cast<int32_t>(i + 7); },
            "broadcast of " + std::to_string(count));
          !wrong.empty())
        return wrong;
      c.barrier();
    }
    std::vector<float> sum(1000, 1.0f);
    allreduce_options o;
    o.data = sum.data();
    o.count = sum.size();
    c.allreduce(o);
    return sum.front() == size && sum.back() == size ? "" : "allreduce";
  });
}

TEST_F(gloo_abort_test, beyond_8_members_a_ring_waiting_for_silent_peers_fails_at_the_abort) {
  connect_ranks(9);
  std::vector<float> data(1 << 20, 1.0f);
  const double after = allreduce_aborted_after(data, 300ms, true);
  EXPECT_GT(after, 0.0);
  EXPECT_LT(after, 2.0);
}

// Ring neighbours' links carry a failure around the ring: a failing rank
// shuts its links, and the neighbour waiting on one of them fails in turn.
// With rank 4 silent, every other rank ends up waiting for its left
// neighbour's next piece; the abort of rank 5 then ends every other
// rank's allreduce (6, 7, ..., 3) long before the 30 s timeout.
TEST_F(gloo_abort_test, beyond_8_members_a_failure_goes_around_the_ring_of_links) {
  constexpr int size = 9;
  connect_ranks(size);
  const auto start = clock::now();
  auto aborter = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(300ms);
    ranks_[5]->abort();
  });
  on_every_rank(size, [&](int rank) -> std::string {
    if (rank == 4)
      return "";
    std::vector<float> data(1 << 20, 1.0f);
    allreduce_options o;
    o.data = data.data();
    o.count = data.size();
    try {
      ranks_[rank]->allreduce(o);
    } catch (const backend_error&) {
      const double after = std::chrono::duration<double>(clock::now() - start).count();
      return after < 5.0 ? "" : "failed only after " + std::to_string(after) + " s";
    }
    return "returned without rank 4";
  });
  aborter.get();
}

// An abort that comes while a shared-memory communicator connects ends its
// setup before the next step that would wait for peers (here the hosts'
// exchange, which rank 1 then waits out alone, for its 2 s).
TEST_F(gloo_abort_test, a_shared_memory_setup_aborted_meanwhile_stops_before_its_next_step) {
  std::vector<std::unique_ptr<shm_communicator>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    backend_context ctx;
    ctx.rank = rank;
    ctx.size = 2;
    ctx.advertise_host = "127.0.0.1";
    ctx.host = "one-host";
    ctx.store =
      std::make_shared<elastic::embedded_store_client>("127.0.0.1", store_.port(), secret, 5s);
    ctx.store_prefix = "abort-test/shm/";
    ctx.timeout = rank == 0 ? 30s : 2s;
    ranks.push_back(std::make_unique<shm_communicator>(ctx));
  }
  ranks[0]->abort();
  auto other = std::async(std::launch::async, [&] {
    try {
      ranks[1]->connect();
    } catch (const std::exception&) {
      // the hosts' exchange without rank 0
    }
  });
  const auto start = clock::now();
  std::string error;
  try {
    ranks[0]->connect();
  } catch (const backend_error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("shared-memory setup was aborted before the hosts' exchange"),
            std::string::npos)
    << error;
  EXPECT_LT(std::chrono::duration<double>(clock::now() - start).count(), 5.0);
  other.get();
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
