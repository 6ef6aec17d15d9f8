// The Gloo-mode small exchanges' own TCP links: every member's piece
// arrives, a member out of step is named, a silent, aborted or departed
// peer ends a call with an error that says so, and a connection without
// the store's token never becomes a link.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.hpp"
#include "backends/gloo/tcp_links.hpp"
#include "elastic/embedded_store.hpp"

namespace troupe::backends {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

const std::string secret = "tcp-links-test-secret-0123456789ab";

class tcp_links_test : public ::testing::Test {
protected:
  std::shared_ptr<elastic::store_client> client() {
    return std::make_shared<elastic::embedded_store_client>("127.0.0.1", store_.port(), secret,
                                                            5s);
  }

  std::unique_ptr<tcp_links> link_rank(int rank, int size, const std::string& prefix,
                                       tcp_links::shape shape = tcp_links::shape::mesh) {
    auto store = client();
    return std::make_unique<tcp_links>(*store, prefix, rank, size, "127.0.0.1", 5s, shape);
  }

  // Every member of a set of `size`, connected concurrently.
  std::vector<std::unique_ptr<tcp_links>> link_all(int size, const std::string& prefix,
                                                   tcp_links::shape shape = tcp_links::shape::mesh) {
    std::vector<std::future<std::unique_ptr<tcp_links>>> connecting;
    for (int rank = 0; rank < size; ++rank)
      connecting.push_back(std::async(std::launch::async,
                                      [=] { return link_rank(rank, size, prefix, shape); }));
    std::vector<std::unique_ptr<tcp_links>> links;
    for (auto& c : connecting)
      links.push_back(c.get());
    return links;
  }

  // What rank `from` sends rank `to` in call `call`: its size and bytes
  // tell all three apart.
  static std::vector<char> message(int from, int to, int call) {
    const size_t bytes = call == 1 ? 0 : static_cast<size_t>(call) * 997 + from * 13 + to * 7;
    std::vector<char> m(bytes);
    for (size_t i = 0; i < bytes; ++i)
      m[i] = static_cast<char>(from * 31 + to * 17 + call * 5 + i);
    return m;
  }

  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const backend_error& e) {
      return e.what();
    }
    return "";
  }

  elastic::store_server store_{"127.0.0.1", 0, secret};
};

TEST_F(tcp_links_test, every_member_receives_each_others_piece_call_after_call) {
  constexpr int size = 3;
  auto links = link_all(size, "links/pieces/");
  // Call 1 sends empty pieces, call 40 about 40 KiB both ways at once, more
  // than a socket takes before its reader reads.
  const std::vector<int> calls = {0, 1, 2, 40, 3};
  std::vector<std::future<void>> runs;
  for (int rank = 0; rank < size; ++rank)
    runs.push_back(std::async(std::launch::async, [&, rank] {
      for (int call : calls) {
        std::vector<std::vector<char>> out(size), in(size);
        std::vector<link_piece> pieces(size);
        for (int p = 0; p < size; ++p) {
          if (p == rank)
            continue;
          out[p] = message(rank, p, call);
          in[p].assign(message(p, rank, call).size(), 0);
          pieces[p] = {out[p].data(), out[p].size(), in[p].data(), in[p].size()};
        }
        links[rank]->exchange(pieces, 5s);
        for (int p = 0; p < size; ++p) {
          if (p != rank) {
            EXPECT_EQ(in[p], message(p, rank, call))
              << "rank " << rank << " from " << p << ", call " << call;
          }
        }
      }
    }));
  for (auto& r : runs)
    r.get();
}

// A ring links each member to its two neighbours only: messages go both
// ways around it, call after call, and a piece naming any other member is
// refused before anything is sent (the links stay usable).
TEST_F(tcp_links_test, a_ring_links_neighbours_only) {
  constexpr int size = 5;
  auto links = link_all(size, "links/ring/", tcp_links::shape::ring);
  for (int rank = 0; rank < size; ++rank)
    for (int p = 0; p < size; ++p)
      EXPECT_EQ(links[rank]->linked(p), p != rank && ((p - rank + size) % size == 1 ||
                                                      (rank - p + size) % size == 1))
        << "rank " << rank << ", member " << p;
  std::vector<std::future<void>> runs;
  for (int rank = 0; rank < size; ++rank)
    runs.push_back(std::async(std::launch::async, [&, rank] {
      const int right = (rank + 1) % size;
      const int left = (rank + size - 1) % size;
      const int other = (rank + 2) % size;
      std::vector<link_piece> stray(size, no_message);
      stray[other] = {&rank, sizeof rank, nullptr, 0, true, false};
      const auto refused = error_of([&] { links[rank]->exchange(stray, 5s); });
      EXPECT_NE(refused.find("has no link to rank " + std::to_string(other)), std::string::npos)
        << refused;
      for (int call : {0, 1, 40, 2}) {
        std::vector<link_piece> pieces(size, no_message);
        const auto to_right = message(rank, right, call), to_left = message(rank, left, call);
        std::vector<char> from_left(message(left, rank, call).size()),
          from_right(message(right, rank, call).size());
        pieces[right] = {to_right.data(), to_right.size(), from_right.data(), from_right.size()};
        pieces[left] = {to_left.data(), to_left.size(), from_left.data(), from_left.size()};
        links[rank]->exchange(pieces, 5s);
        EXPECT_EQ(from_left, message(left, rank, call)) << "rank " << rank << ", call " << call;
        EXPECT_EQ(from_right, message(right, rank, call)) << "rank " << rank << ", call " << call;
      }
    }));
  for (auto& r : runs)
    r.get();
}

// Messages whose receivers learn their sizes from the senders, between
// exchanges of known sizes: every payload lands where the placement said.
TEST_F(tcp_links_test, receivers_learn_sizes_from_the_senders) {
  constexpr int size = 3;
  auto links = link_all(size, "links/sized/");
  std::vector<std::future<std::string>> runs;
  for (int rank = 0; rank < size; ++rank)
    runs.push_back(std::async(std::launch::async, [&, rank]() -> std::string {
      // Call 3: rank 0 sends rank 1 nothing and hears from nobody, the
      // others send empty and non-empty messages in the same call.
      for (int call : {0, 1, 40, 2, 3}) {
        std::vector<std::vector<char>> out(size), in(size);
        std::vector<link_piece> pieces(size);
        for (int p = 0; p < size; ++p) {
          if (p == rank)
            continue;
          out[p] = call == 3 && (rank + p) % 2 == 1 ? std::vector<char>{} : message(rank, p, call);
          pieces[p].send = out[p].data();
          pieces[p].send_bytes = out[p].size();
          if (call == 3 && rank == 0)
            pieces[p].receives = false;
          if (call == 3 && p == 0)
            pieces[p].sends = false;
        }
        std::vector<size_t> told;
        links[rank]->exchange_sized_by_senders(pieces, 5s, [&](const std::vector<size_t>& bytes) {
          told = bytes;
          std::vector<void*> where(size);
          for (int p = 0; p < size; ++p) {
            in[p].assign(bytes[p], 0);
            where[p] = in[p].data();
          }
          return where;
        });
        for (int p = 0; p < size; ++p) {
          if (p == rank || (call == 3 && rank == 0))
            continue;
          const auto expected = call == 3 && (rank + p) % 2 == 1 ? std::vector<char>{}
                                                                 : message(p, rank, call);
          if (told[p] != expected.size() || in[p] != expected)
            return "from rank " + std::to_string(p) + " in call " + std::to_string(call);
        }
        // A known-size exchange after it stays in step.
        int sent = rank, got[size] = {};
        std::vector<link_piece> plain(size);
        for (int p = 0; p < size; ++p)
          plain[p] = {&sent, sizeof sent, &got[p], sizeof got[p]};
        links[rank]->exchange(plain, 5s);
        for (int p = 0; p < size; ++p)
          if (p != rank && got[p] != p)
            return "plain exchange after call " + std::to_string(call);
      }
      return "";
    }));
  for (int rank = 0; rank < size; ++rank)
    EXPECT_EQ(runs[rank].get(), "") << "rank " << rank;
}

TEST_F(tcp_links_test, a_placement_that_refuses_fails_the_links) {
  auto links = link_all(2, "links/refused/");
  char byte = 1;
  auto other = std::async(std::launch::async, [&] {
    return error_of([&] { links[1]->exchange({{&byte, 1, &byte, 1}, {}}, 5s); });
  });
  const auto error = error_of([&] {
    links[0]->exchange_sized_by_senders({{}, {&byte, 1}}, 5s,
                                        [](const std::vector<size_t>&) -> std::vector<void*> {
                                          throw backend_error("no room for it");
                                        });
  });
  EXPECT_NE(error.find("no room for it"), std::string::npos) << error;
  other.get();
  const auto later = error_of([&] { links[0]->exchange({{}, {&byte, 1, &byte, 1}}, 5s); });
  EXPECT_NE(later.find("an earlier exchange failed"), std::string::npos) << later;
}

TEST_F(tcp_links_test, a_member_sending_another_size_is_named_and_the_links_stay_failed) {
  auto links = link_all(2, "links/size/");
  char four[4] = {}, eight[8] = {}, into_zero[8] = {}, into_one[8] = {};
  auto other = std::async(std::launch::async, [&] {
    // Rank 1 sends 4 bytes where rank 0 expects 8.
    return error_of([&] { links[1]->exchange({{four, 4, into_one, 8}, {}}, 5s); });
  });
  const auto error = error_of([&] { links[0]->exchange({{}, {eight, 8, into_zero, 8}}, 5s); });
  EXPECT_NE(error.find("rank 1 sent"), std::string::npos) << error;
  EXPECT_NE(error.find("expected 8 bytes"), std::string::npos) << error;
  other.get();
  const auto later = error_of([&] { links[0]->exchange({{}, {eight, 8, into_zero, 8}}, 5s); });
  EXPECT_NE(later.find("an earlier exchange failed"), std::string::npos) << later;
}

TEST_F(tcp_links_test, an_abort_wakes_a_call_waiting_for_a_silent_peer) {
  auto links = link_all(2, "links/abort/");
  char byte = 0;
  auto aborter = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(200ms);
    const auto at = clock::now();
    links[0]->abort();
    return at;
  });
  const auto error = error_of([&] { links[0]->exchange({{}, {&byte, 1, &byte, 1}}, 30s); });
  const auto returned = clock::now();
  EXPECT_NE(error.find("aborted"), std::string::npos) << error;
  EXPECT_LT(returned - aborter.get(), 1s);
  // Every later call fails at once.
  const auto start = clock::now();
  EXPECT_THROW(links[0]->exchange({{}, {&byte, 1, &byte, 1}}, 30s), backend_error);
  EXPECT_LT(clock::now() - start, 1s);
}

TEST_F(tcp_links_test, a_silent_peer_is_named_at_the_deadline) {
  auto links = link_all(3, "links/deadline/");
  char byte = 0;
  // Rank 0 exchanges with rank 1, which stays silent; rank 2 waits for a
  // message from rank 0 that never comes, with a far deadline.
  auto two = std::async(std::launch::async, [&] {
    const auto start = clock::now();
    auto error = error_of([&] {
      links[2]->exchange({{nullptr, 0, &byte, 1, false, true}, no_message, no_message}, 30s);
    });
    return std::make_pair(error, clock::now() - start);
  });
  const auto start = clock::now();
  const auto error =
    error_of([&] { links[0]->exchange({no_message, {&byte, 1, &byte, 1}, no_message}, 300ms); });
  EXPECT_GE(clock::now() - start, 300ms);
  EXPECT_NE(error.find("waited 300 ms"), std::string::npos) << error;
  EXPECT_NE(error.find("for rank 1"), std::string::npos) << error;
  EXPECT_EQ(error.find("rank 2"), std::string::npos) << error;
  // Rank 0's failure shut its links: rank 2 learns at once, not at its
  // deadline.
  const auto [two_error, two_took] = two.get();
  EXPECT_NE(two_error.find("rank 0 closed its link to rank 2"), std::string::npos) << two_error;
  EXPECT_LT(two_took, 5s);
}

TEST_F(tcp_links_test, a_peer_that_leaves_is_named) {
  auto links = link_all(2, "links/leave/");
  links[1].reset();
  char byte = 0;
  const auto error = error_of([&] { links[0]->exchange({{}, {&byte, 1, &byte, 1}}, 5s); });
  EXPECT_NE(error.find("rank 1 closed its link"), std::string::npos) << error;
}

// A rank with only a send pending and its peer's window full learns of
// the peer's failure from the closed link (POLLRDHUP), not at its
// deadline: rank 1 sends 64 MiB that rank 0 never reads, and rank 0's links
// are shut (as when another transport of the set failed there).
TEST_F(tcp_links_test, a_sender_learns_at_once_that_its_receiver_shut_its_links) {
  auto links = link_all(2, "links/full/");
  std::vector<char> big(size_t{64} << 20, 'x');
  auto sender = std::async(std::launch::async, [&] {
    const auto error = error_of([&] {
      links[1]->exchange({{big.data(), big.size(), nullptr, 0, true, false}, no_message}, 30s);
    });
    return std::make_pair(error, clock::now());
  });
  std::this_thread::sleep_for(500ms);  // the window fills
  const auto shut_at = clock::now();
  links[0]->shut("another transport failed");
  const auto [error, failed_at] = sender.get();
  EXPECT_NE(error.find("rank 0 closed its link to rank 1"), std::string::npos) << error;
  EXPECT_LT(std::chrono::duration<double>(failed_at - shut_at).count(), 5.0);
  char byte = 0;
  const auto later = error_of([&] { links[0]->exchange({{}, {&byte, 1, &byte, 1}}, 5s); });
  EXPECT_NE(later.find("another transport failed"), std::string::npos) << later;
}

TEST_F(tcp_links_test, connections_without_the_token_never_become_links) {
  const std::string prefix = "links/stranger/";
  auto zero = std::async(std::launch::async, [&] { return link_rank(0, 2, prefix); });
  // Rank 0's address for rank 1, as the store holds it.
  auto store = client();
  std::string address;
  for (auto until = clock::now() + 5s; address.empty() && clock::now() < until;) {
    for (auto& [key, value] : store->list_values(prefix))
      if (std::count(value.begin(), value.end(), ' ') == 2)
        address = value;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_FALSE(address.empty());
  const auto port = static_cast<uint16_t>(std::stoul(address.substr(address.find(' ') + 1)));
  const auto dial = [&] {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(0, ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a));
    return fd;
  };
  // One claims rank 1 with a wrong token; ten say nothing, each allowed a
  // second to: they wait side by side, not in turn in front of rank 1
  // (in turn they took 10 s, past the 5 s the setup has).
  const int impostor = dial();
  std::string hello(4, '\0');
  hello[0] = 1;
  hello += std::string(64, 'f');
  ASSERT_EQ(static_cast<ssize_t>(hello.size()), ::write(impostor, hello.data(), hello.size()));
  std::vector<int> silent;
  for (int i = 0; i < 10; ++i)
    silent.push_back(dial());
  const auto linking = clock::now();
  auto one = link_rank(1, 2, prefix);
  auto zero_links = zero.get();
  EXPECT_LT(clock::now() - linking, 2s);
  // The links are rank 1's: a call goes through.
  int from_zero = 0, from_one = 0, sent_zero = 10, sent_one = 11;
  auto other = std::async(std::launch::async, [&] {
    one->exchange({{&sent_one, 4, &from_zero, 4}, {}}, 5s);
  });
  zero_links->exchange({{}, {&sent_zero, 4, &from_one, 4}}, 5s);
  other.get();
  EXPECT_EQ(from_one, 11);
  EXPECT_EQ(from_zero, 10);
  ::close(impostor);
  for (int fd : silent)
    ::close(fd);
}

} // namespace
} // namespace troupe::backends
