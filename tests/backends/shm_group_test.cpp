// The shared-memory reduction of ranks on one host, with real processes:
// each member is a forked child, results checked exactly, failures bounded
// in time.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/arith.hpp"
#include "backends/shm/shm_group.hpp"

namespace troupe::backends {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

// Small slots: several rounds per tensor, and rounds above the size where
// three or more members reduce-scatter.
constexpr size_t test_slot_bytes = size_t{64} << 10;

// A group's segment name and a pipe, made before the fork, on which its
// creator tells the others that the segment is complete (as the store does
// for shm_communicator).
struct test_group {
  explicit test_group(const char* what)
      : name("/troupe-test-" + std::string(what) + "-" + std::to_string(::getpid())) {
    if (::pipe(ready) != 0)
      throw std::runtime_error("pipe failed");
  }
  ~test_group() {
    ::close(ready[0]);
    ::close(ready[1]);
  }
  std::string name;
  int ready[2];
};

bool name_exists(const std::string& name) {
  return ::access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

// Member `member` of group `g`: member 0 creates the segment, the others
// open it once it is complete.
shm_group join(const test_group& g, int member, int members,
               std::chrono::milliseconds timeout = 10s) {
  if (member == 0) {
    auto segment = shm_group::create_segment(g.name, members, test_slot_bytes);
    const std::string tokens(static_cast<size_t>(members - 1), 'x');
    if (::write(g.ready[1], tokens.data(), tokens.size()) != static_cast<ssize_t>(tokens.size()))
      throw std::runtime_error("write to the ready pipe failed");
    return shm_group(std::move(segment), 0, members, timeout);
  }
  pollfd p{g.ready[0], POLLIN, 0};
  char token;
  if (::poll(&p, 1, 10000) != 1 || ::read(g.ready[0], &token, 1) != 1)
    throw std::runtime_error("the creator of " + g.name + " did not say it is ready");
  return shm_group(shm_segment::open(g.name, shm_group::segment_bytes(members, test_slot_bytes)),
                   member, members, timeout);
}

// Runs body(i) in `n` forked children and returns their exit statuses
// (128 + signal when killed, -1 when still running after 30 s: killed).
std::vector<int> run_children(int n, const std::function<int(int)>& body) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 3;
      try {
        code = body(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());
        code = 2;
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> status(n, -1);
  int left = n;
  const auto deadline = clock::now() + 30s;
  while (left > 0 && clock::now() < deadline) {
    int st = 0;
    const pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(1ms);
      continue;
    }
    for (int i = 0; i < n; ++i)
      if (pids[i] == pid) {
        status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
  }
  for (int i = 0; i < n; ++i)
    if (status[i] == -1) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
    }
  return status;
}

// Element i of `dtype` at `p`, as a double, and back.
double load(data_type dtype, const void* p, size_t i) {
  if (is_half(dtype)) {
    float f;
    half_to_float(dtype, static_cast<const uint16_t*>(p) + i, &f, 1);
    return f;
  }
  double v = 0;
  with_element_type(dtype, [&](auto* tag) {
    v = static_cast<double>(static_cast<const std::remove_pointer_t<decltype(tag)>*>(p)[i]);
  });
  return v;
}

void store(data_type dtype, void* p, size_t i, double v) {
  if (is_half(dtype)) {
    const auto f = static_cast<float>(v);
    float_to_half(dtype, &f, static_cast<uint16_t*>(p) + i, 1);
    return;
  }
  with_element_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    static_cast<T*>(p)[i] = static_cast<T>(v);
  });
}

const data_type all_dtypes[] = {data_type::uint8,   data_type::int8,    data_type::uint16,
                                data_type::int16,   data_type::int32,   data_type::int64,
                                data_type::float16, data_type::bfloat16, data_type::float32,
                                data_type::float64, data_type::boolean};
const reduce_op all_ops[] = {reduce_op::sum, reduce_op::average, reduce_op::product,
                             reduce_op::min, reduce_op::max};

// Rank r's element i: small integers, exact in every dtype and every
// reduction of up to 4 ranks (0 or 1 for bool).
double input_value(data_type dtype, int r, size_t i) {
  return dtype == data_type::boolean ? static_cast<double>((i + r) % 2)
                                     : static_cast<double>((i + 2 * r) % 3 + 1);
}

double expected_value(data_type dtype, reduce_op op, int ranks, size_t i) {
  double acc = input_value(dtype, 0, i);
  for (int r = 1; r < ranks; ++r) {
    const double v = input_value(dtype, r, i);
    switch (op) {
      case reduce_op::sum:
      case reduce_op::average:  // the caller divides
        acc = dtype == data_type::boolean ? std::max(acc, v) : acc + v;
        break;
      case reduce_op::product: acc *= v; break;
      case reduce_op::min: acc = std::min(acc, v); break;
      default: acc = std::max(acc, v); break;
    }
  }
  return acc;
}

// Every dtype, op and odd size through `reduce_all` on global rank `rank`
// of `ranks`; returns the number of wrong elements (printed).
int check_everything(int rank, int ranks,
                     const std::function<void(void*, size_t, data_type, reduce_op)>& reduce_all) {
  int wrong = 0;
  for (const auto dtype : all_dtypes) {
    const size_t esize = element_size(dtype);
    const size_t counts[] = {1, 7, 2 * test_slot_bytes / esize + 5};
    for (const auto op : all_ops) {
      // A bool average is refused before it reaches a reduction (bools
      // cannot be scaled).
      if (dtype == data_type::boolean && op == reduce_op::average)
        continue;
      for (const size_t count : counts) {
        std::vector<char> data(count * esize);
        for (size_t i = 0; i < count; ++i)
          store(dtype, data.data(), i, input_value(dtype, rank, i));
        reduce_all(data.data(), count, dtype, op);
        for (size_t i = 0; i < count; ++i) {
          const double want = expected_value(dtype, op, ranks, i);
          const double got = load(dtype, data.data(), i);
          if (got != want && wrong++ < 5)
            std::fprintf(stderr, "rank %d: %s %s count %zu element %zu: %g, expected %g\n", rank,
                         to_string(dtype), to_string(op), count, i, got, want);
        }
      }
    }
  }
  return wrong;
}

// Runs body(group, m) as member m of a fresh group of `members` forked
// children and expects each to return 0.
void expect_every_member_passes(const char* what, int members,
                                const std::function<int(shm_group&, int)>& body) {
  const test_group g(what);
  const auto status = run_children(members, [&](int m) {
    auto group = join(g, m, members);
    return body(group, m);
  });
  EXPECT_EQ(status, std::vector<int>(members, 0));
}

class shm_group_members : public ::testing::TestWithParam<int> {};

TEST_P(shm_group_members, reduce_every_dtype_and_op_exactly) {
  const int members = GetParam();
  const test_group g("ops");
  const auto status = run_children(members, [&](int m) {
    auto group = join(g, m, members);
    const int wrong = check_everything(m, members, [&](void* p, size_t n, data_type d, reduce_op o) {
      group.allreduce(p, n, element_size(d), reduction_of(d, o), {});
    });
    return wrong == 0 ? 0 : 1;
  });
  EXPECT_EQ(status, std::vector<int>(members, 0));
  EXPECT_FALSE(name_exists(g.name));
}

// The same through pieces where they lie (a fused allreduce's tensors
// without a fusion buffer): each vector cut into pieces of 1 to 300
// elements, each piece in memory of its own, in the same places on every
// member (as the response fixes the tensors).
TEST_P(shm_group_members, reduce_pieces_where_they_lie) {
  const int members = GetParam();
  expect_every_member_passes("pieces", members, [&](shm_group& group, int m) {
    const int wrong = check_everything(m, members, [&](void* p, size_t n, data_type d, reduce_op o) {
      const size_t esize = element_size(d);
      std::vector<std::vector<char>> parts;
      buffer_pieces pieces;
      for (size_t at = 0, k = 0; at < n; ++k) {
        const size_t take = std::min(n - at, 1 + (k * 7919 + n) % 300);
        parts.emplace_back(static_cast<char*>(p) + at * esize,
                           static_cast<char*>(p) + (at + take) * esize);
        at += take;
      }
      for (auto& part : parts)
        pieces.push_back({part.data(), part.size()});
      pieces.insert(pieces.begin() + static_cast<long>(pieces.size() / 2), {nullptr, 0});
      group.allreduce(pieces, esize, reduction_of(d, o), {});
      size_t at = 0;
      for (const auto& part : parts) {
        std::memcpy(static_cast<char*>(p) + at, part.data(), part.size());
        at += part.size();
      }
    });
    return wrong == 0 ? 0 : 1;
  });
}

// 1 when a 1-element sum after `what` does not give `members`: the kinds
// share the segment's barriers and slot sets, so a member out of step with
// the others reads the wrong round.
int allreduce_out_of_step(shm_group& group, int m, int members, const char* what) {
  float x = 1;
  group.allreduce(&x, 1, sizeof x, reduction_of(data_type::float32, reduce_op::sum), {});
  if (x == static_cast<float>(members))
    return 0;
  std::fprintf(stderr, "member %d: allreduce after %s gave %g\n", m, what, x);
  return 1;
}

// Byte i of member m's data in the broadcast and allgather tests.
char pattern(int m, size_t i) {
  return static_cast<char>((i * 131 + static_cast<size_t>(m) * 29 + 7) % 251);
}

// Broadcasts from every root, of sizes from none to several rounds, each
// followed by a 1-element allreduce (allreduce_out_of_step).
TEST_P(shm_group_members, broadcast_from_every_root_between_allreduces) {
  const int members = GetParam();
  expect_every_member_passes("broadcast", members, [&](shm_group& group, int m) {
    int wrong = 0;
    const size_t sizes[] = {0, 1, 5, test_slot_bytes - 1, test_slot_bytes,
                            3 * test_slot_bytes + 5};
    for (int root = 0; root < members; ++root)
      for (const size_t bytes : sizes) {
        std::vector<char> data(bytes, static_cast<char>(0x5a));
        if (m == root)
          for (size_t i = 0; i < bytes; ++i)
            data[i] = pattern(root, i);
        group.broadcast(data.data(), bytes, root);
        for (size_t i = 0; i < bytes; ++i)
          if (data[i] != pattern(root, i) && wrong++ < 5)
            std::fprintf(stderr, "member %d: broadcast of %zu bytes from %d: byte %zu wrong\n", m,
                         bytes, root, i);
        wrong += allreduce_out_of_step(group, m, members, "a broadcast");
      }
    return wrong == 0 ? 0 : 1;
  });
}

// Allgathers of unequal parts (none, less than a slot, several slots) into
// a buffer of their concatenation, with barriers in between; a member's
// part at its own place in the output, as an in-place caller passes it.
TEST_P(shm_group_members, allgather_unequal_parts_and_barriers) {
  const int members = GetParam();
  expect_every_member_passes("allgather", members, [&](shm_group& group, int m) {
    int wrong = 0;
    const std::vector<std::vector<size_t>> layouts = {
      std::vector<size_t>(static_cast<size_t>(members), 4),
      [&] {
        std::vector<size_t> b;
        for (int k = 0; k < members; ++k)
          b.push_back(k == 1 ? 0 : static_cast<size_t>(k + 1) * test_slot_bytes + 3 * k + 1);
        return b;
      }(),
      std::vector<size_t>(static_cast<size_t>(members), 0),
    };
    for (const auto& bytes : layouts)
      for (const bool in_place : {false, true}) {
        size_t total = 0;
        std::vector<size_t> offset;
        for (auto b : bytes) {
          offset.push_back(total);
          total += b;
        }
        const auto me = static_cast<size_t>(m);
        std::vector<char> input(bytes[me]);
        for (size_t i = 0; i < input.size(); ++i)
          input[i] = pattern(m, i);
        std::vector<char> output(total + 1, static_cast<char>(0x5a));
        if (in_place)
          std::copy(input.begin(), input.end(), output.begin() + static_cast<long>(offset[me]));
        group.allgather(in_place ? output.data() + offset[me] : input.data(), output.data(),
                        bytes);
        for (size_t k = 0; k < bytes.size(); ++k)
          for (size_t i = 0; i < bytes[k]; ++i)
            if (output[offset[k] + i] != pattern(static_cast<int>(k), i) && wrong++ < 5)
              std::fprintf(stderr, "member %d: allgather part of %zu, byte %zu wrong\n", m, k, i);
        if (output[total] != static_cast<char>(0x5a) && wrong++ < 5)
          std::fprintf(stderr, "member %d: allgather wrote past its output\n", m);
        group.sync();
      }
    return wrong == 0 ? 0 : 1;
  });
}

// Alltoalls whose blocks differ per pair (none, less than a round's part,
// several rounds), so members need different numbers of rounds and must
// agree on the most; allreduces in between keep the kinds in step.
TEST_P(shm_group_members, alltoall_blocks_of_every_size_between_allreduces) {
  const int members = GetParam();
  expect_every_member_passes("alltoall", members, [&](shm_group& group, int m) {
    int wrong = 0;
    // Bytes member `from` sends member `to` in layout `l`.
    const auto block = [&](int l, int from, int to) -> size_t {
      if (l == 0)
        return 4;
      if (l == 1)
        return from == 1 && to == 0 ? 3 * test_slot_bytes + 7 : (from + 2 * to) % 3 * 100;
      return (from * 7 + to * 3) % 5 == 0 ? 0 : static_cast<size_t>(from + 1) * 5000 + to;
    };
    const auto byte_of = [](int l, int from, int to, size_t i) {
      return static_cast<char>((i * 31 + static_cast<size_t>(from * 7 + to * 13 + l)) % 253);
    };
    for (int l = 0; l < 3; ++l) {
      std::vector<size_t> send, recv;
      std::vector<char> input;
      size_t received = 0;
      for (int k = 0; k < members; ++k) {
        send.push_back(block(l, m, k));
        recv.push_back(block(l, k, m));
        for (size_t i = 0; i < send.back(); ++i)
          input.push_back(byte_of(l, m, k, i));
        received += recv.back();
      }
      std::vector<char> output(received + 1, static_cast<char>(0x5a));
      group.alltoall(input.data(), send, output.data(), recv);
      size_t at = 0;
      for (int k = 0; k < members; ++k)
        for (size_t i = 0; i < recv[static_cast<size_t>(k)]; ++i, ++at)
          if (output[at] != byte_of(l, k, m, i) && wrong++ < 5)
            std::fprintf(stderr, "member %d: alltoall layout %d, byte %zu from %d wrong\n", m, l,
                         i, k);
      if (output[received] != static_cast<char>(0x5a) && wrong++ < 5)
        std::fprintf(stderr, "member %d: alltoall wrote past its output\n", m);
      wrong += allreduce_out_of_step(group, m, members, "an alltoall");
    }
    return wrong == 0 ? 0 : 1;
  });
}

// A barrier holds every member until the last arrives: each member counts
// its steps in memory shared by the forked children and, past the barrier
// of step k, finds every other member at step k or later.
TEST_P(shm_group_members, sync_waits_for_every_member) {
  const int members = GetParam();
  auto* steps = static_cast<std::atomic<int>*>(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                                                      MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(steps, MAP_FAILED);
  for (int k = 0; k < members; ++k)
    new (&steps[k]) std::atomic<int>(0);
  expect_every_member_passes("sync", members, [&](shm_group& group, int m) {
    for (int step = 1; step <= 200; ++step) {
      if ((step + m) % 7 == 0)
        std::this_thread::sleep_for(1ms);  // someone is late now and then
      steps[m].store(step);
      group.sync();
      for (int k = 0; k < members; ++k)
        if (steps[k].load() < step) {
          std::fprintf(stderr, "member %d passed barrier %d before member %d arrived\n", m,
                       step, k);
          return 1;
        }
    }
    return 0;
  });
  ::munmap(steps, 4096);
}

INSTANTIATE_TEST_SUITE_P(members, shm_group_members, ::testing::Values(2, 3, 4));

TEST(shm_group, two_hosts_of_two_reduce_across_through_the_cross_step) {
  // Ranks 0, 1 on "host" A and 2, 3 on B; the cross step of local member l
  // is a group of its own with the same member of the other host, standing
  // in for the Gloo context across hosts.
  const test_group host_a("host-a");
  const test_group host_b("host-b");
  const test_group cross_0("cross-0");
  const test_group cross_1("cross-1");
  const auto status = run_children(4, [&](int rank) {
    const int host = rank / 2;
    const int local = rank % 2;
    auto on_host = join(host ? host_b : host_a, local, 2);
    auto across = join(local ? cross_1 : cross_0, host, 2);
    const int wrong = check_everything(rank, 4, [&](void* p, size_t n, data_type d, reduce_op o) {
      const auto reduce = reduction_of(d, o);
      on_host.allreduce(p, n, element_size(d), reduce, [&](void* part, size_t count) {
        if (count > 0)
          across.allreduce(part, count, element_size(d), reduce, {});
      });
    });
    return wrong == 0 ? 0 : 1;
  });
  EXPECT_EQ(status, std::vector<int>(4, 0));
}

// Exit statuses of the waiting member 0 of a pair.
constexpr int threw_as_expected = 0;
constexpr int completed = 10;
constexpr int too_slow = 11;
constexpr int other_error = 12;

// Member 0 allreduces while member 1 runs `partner`; 0 when member 0's
// allreduce threw an error containing `expected` within `bound`.
std::vector<int> wait_failing(const char* what, const std::string& expected,
                              std::chrono::milliseconds bound,
                              const std::function<void(shm_group&)>& first,
                              const std::function<int(shm_group&)>& partner) {
  const test_group g(what);
  return run_children(2, [&](int m) {
    auto group = join(g, m, 2);
    if (m == 1)
      return partner(group);
    std::vector<float> data(1000, 1.0f);
    std::thread side([&] { first(group); });
    const auto start = clock::now();
    int code = completed;
    try {
      group.allreduce(data.data(), data.size(), sizeof(float),
                      reduction_of(data_type::float32, reduce_op::sum), {});
    } catch (const backend_error& e) {
      code = std::string(e.what()).find(expected) == std::string::npos ? other_error
             : clock::now() - start > bound                         ? too_slow
                                                                   : threw_as_expected;
      if (code != threw_as_expected)
        std::fprintf(stderr, "member 0: %s\n", e.what());
    }
    side.join();
    return code;
  });
}

TEST(shm_group, an_abort_interrupts_a_wait_and_fails_the_other_members) {
  const auto status = wait_failing(
    "abort", "was aborted", 1500ms,
    [](shm_group& g) {
      std::this_thread::sleep_for(300ms);
      g.abort();
    },
    [](shm_group& g) {
      // Never takes part in the first allreduce, as a frozen rank; its next
      // call sees the abort at once.
      std::this_thread::sleep_for(600ms);
      float x = 1;
      try {
        g.allreduce(&x, 1, sizeof x, reduction_of(data_type::float32, reduce_op::sum), {});
      } catch (const backend_error& e) {
        return std::string(e.what()).find("was aborted") != std::string::npos ? 0 : 1;
      }
      return 1;
    });
  EXPECT_EQ(status, (std::vector<int>{threw_as_expected, 0}));
}

TEST(shm_group, a_member_whose_process_exits_fails_the_wait) {
  // _exit skips the group's destructor: only its process is gone.
  const auto status = wait_failing(
    "exit", "exited", 1000ms, [](shm_group&) {},
    [](shm_group&) -> int {
      std::this_thread::sleep_for(100ms);
      ::_exit(0);
    });
  EXPECT_EQ(status, (std::vector<int>{threw_as_expected, 0}));
}

TEST(shm_group, a_member_that_closes_its_side_fails_the_wait) {
  const auto status = wait_failing(
    "close", "closed its side", 1000ms, [](shm_group&) {},
    [](shm_group&) {
      std::this_thread::sleep_for(100ms);
      return 0;  // returning destroys the group
    });
  EXPECT_EQ(status, (std::vector<int>{threw_as_expected, 0}));
}

// Any process of the job's user can write into the segment. The header's
// words: magic, members, slot bytes; the failure word at byte 128.
TEST(shm_group, a_rewritten_header_is_refused_and_a_garbage_failure_word_is_an_error) {
  const test_group g("forged");
  const auto bytes = shm_group::segment_bytes(2, test_slot_bytes);
  auto creator = shm_group::create_segment(g.name, 2, test_slot_bytes);
  auto spy = shm_segment::open(g.name, bytes);
  spy.keep_name();
  auto* words = static_cast<uint64_t*>(spy.data());
  ASSERT_EQ(words[2], test_slot_bytes);
  // (A member refusing the segment would remove its name: kept here.)
  const auto opened = [&] {
    auto segment = shm_segment::open(g.name, bytes);
    segment.keep_name();
    return segment;
  };
  // Refused at once, not after waiting for the others.
  const auto refused = [&] {
    try {
      shm_group(opened(), 1, 2, 1s);
    } catch (const backend_error& e) {
      return std::string(e.what()).find("is not a group of 2 members") != std::string::npos;
    }
    return false;
  };
  // 2 x (2 + 1) x 2^63 wraps to 0: the layout's size still matches.
  words[2] = (uint64_t{1} << 63) | test_slot_bytes;
  EXPECT_TRUE(refused());
  words[2] = 0;
  EXPECT_TRUE(refused());
  words[2] = test_slot_bytes;
  // Both members join (threads of this process); then a failure word that
  // names no member.
  std::unique_ptr<shm_group> second;
  std::thread joiner([&] {
    try {
      second = std::make_unique<shm_group>(opened(), 1, 2, 5s);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "member 1: " << e.what();
    }
  });
  shm_group first(std::move(creator), 0, 2, 5s);
  joiner.join();
  ASSERT_NE(second, nullptr);
  reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(spy.data()) + 128)
    ->store(uint64_t{3} << 32 | 0x7fffffffu);
  float x = 1;
  try {
    first.allreduce(&x, 1, sizeof x, reduction_of(data_type::float32, reduce_op::sum), {});
    FAIL() << "an allreduce in a failed group succeeded";
  } catch (const backend_error& e) {
    EXPECT_NE(std::string(e.what()).find("an unreadable failure word"), std::string::npos)
      << e.what();
  }
}

TEST(shm_group, a_member_that_never_comes_fails_the_join_and_leaves_no_segment) {
  const test_group g("late");
  const auto start = clock::now();
  const auto status = run_children(1, [&](int) {
    try {
      join(g, 0, 2, 300ms);
    } catch (const backend_error& e) {
      return std::string(e.what()).find("local rank 1") != std::string::npos &&
                 std::string(e.what()).find("did not arrive within 300 ms") != std::string::npos
               ? 0
               : 1;
    }
    return 1;
  });
  EXPECT_EQ(status, std::vector<int>{0});
  EXPECT_LT(clock::now() - start, 5s);
  EXPECT_FALSE(name_exists(g.name));
}

TEST(shm_group, a_waiting_member_sleeps_instead_of_spinning) {
  // Member 1 waits 500 ms for member 0: it must not burn that time on a core.
  const test_group g("idle");
  const auto status = run_children(2, [&](int m) {
    auto group = join(g, m, 2);
    float x = 1;
    const auto cpu_before = std::clock();
    if (m == 0)
      std::this_thread::sleep_for(500ms);
    group.allreduce(&x, 1, sizeof x, reduction_of(data_type::float32, reduce_op::sum), {});
    const double cpu_seconds = static_cast<double>(std::clock() - cpu_before) / CLOCKS_PER_SEC;
    if (m == 1 && cpu_seconds > 0.05) {
      std::fprintf(stderr, "member 1 used %.3f s of CPU waiting 0.5 s\n", cpu_seconds);
      return 1;
    }
    return x == 2.0f ? 0 : 1;
  });
  EXPECT_EQ(status, std::vector<int>(2, 0));
}

} // namespace
} // namespace troupe::backends
