// The shared-memory reduction of ranks on one host, with real processes:
// each member is a forked child (shm_group_harness.hpp), results checked
// exactly. What fails a wait: shm_group_failures_test.cpp.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/arith.hpp"
#include "shm_group_harness.hpp"

namespace troupe::backends {
namespace {

using namespace shm_test;
using namespace std::chrono_literals;

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

// Read from inputs elsewhere (an allreduce into another tensor): the results
// land in the pieces, whatever they held, and the inputs stay as they were.
TEST_P(shm_group_members, reduce_inputs_into_other_memory) {
  const int members = GetParam();
  expect_every_member_passes("apart", members, [&](shm_group& group, int m) {
    int touched = 0;
    const int wrong = check_everything(m, members, [&](void* p, size_t n, data_type d, reduce_op o) {
      const size_t bytes = n * element_size(d);
      const std::vector<char> input(static_cast<char*>(p), static_cast<char*>(p) + bytes);
      const std::vector<char> before = input;
      std::memset(p, 0xab, bytes);
      const size_t half = n / 2 * element_size(d);
      const buffer_pieces pieces{{p, half, input.data()},
                                 {static_cast<char*>(p) + half, bytes - half, input.data() + half}};
      group.allreduce(pieces, element_size(d), reduction_of(d, o), {});
      touched += input != before;
    });
    if (touched > 0)
      std::fprintf(stderr, "member %d: %d inputs written to\n", m, touched);
    return wrong == 0 && touched == 0 ? 0 : 1;
  });
}

// The finish (an average's division, a postscale) runs exactly once on
// every element of the result, whichever member reduced it: in rounds
// every member reduces whole (up to 16 KiB), in shares of larger rounds,
// and through pieces. x -> 2x + 1 tells once from twice.
TEST_P(shm_group_members, finish_every_element_of_the_result_once) {
  const int members = GetParam();
  expect_every_member_passes("finish", members, [&](shm_group& group, int m) {
    const element_finish finish = [](void* data, size_t count) {
      auto* x = static_cast<float*>(data);
      for (size_t i = 0; i < count; ++i)
        x[i] = 2 * x[i] + 1;
    };
    int wrong = 0;
    for (const size_t count : {size_t{1}, size_t{4099}, 2 * test_slot_bytes / 4 + 5}) {
      for (const bool as_pieces : {false, true}) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i)
          data[i] = static_cast<float>(input_value(data_type::float32, m, i));
        const auto sum = reduction_of(data_type::float32, reduce_op::sum);
        if (as_pieces) {
          const size_t half = count / 2;
          const buffer_pieces pieces{{data.data(), half * 4}, {data.data() + half, (count - half) * 4}};
          group.allreduce(pieces, 4, sum, {}, finish);
        } else {
          group.allreduce(data.data(), count, 4, sum, {}, finish);
        }
        for (size_t i = 0; i < count; ++i) {
          const double want =
            2 * expected_value(data_type::float32, reduce_op::sum, members, i) + 1;
          if (data[i] != want && wrong++ < 5)
            std::fprintf(stderr, "member %d: %zu elements%s, element %zu: %g, expected %g\n", m,
                         count, as_pieces ? " in pieces" : "", i, data[i], want);
        }
      }
    }
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

// Each member gets only its share of the reduction, for every dtype and
// op: shares of different sizes (one empty), several rounds of slices (a
// round carries slot / members bytes of each share), the finish once on
// every element of the member's share.
TEST_P(shm_group_members, reduce_scatter_leaves_each_member_its_share) {
  const int members = GetParam();
  expect_every_member_passes("scatter", members, [&](shm_group& group, int m) {
    int wrong = 0;
    for (const auto dtype : all_dtypes) {
      const size_t esize = element_size(dtype);
      const size_t long_share = 2 * test_slot_bytes / esize + 7;
      for (const auto op : all_ops) {
        if (dtype == data_type::boolean && op == reduce_op::average)
          continue;
        for (const bool finish_too : {false, true}) {
          if (finish_too && dtype != data_type::float32)
            continue;
          // Share k: long, 1 element, empty, 5 elements, ...
          std::vector<size_t> counts(static_cast<size_t>(members));
          for (int k = 0; k < members; ++k)
            counts[static_cast<size_t>(k)] = k == 0 ? long_share : k == 2 ? 0 : 1 + 4 * (k % 2 == 0);
          size_t total = 0, first = 0;
          for (int k = 0; k < members; ++k) {
            if (k == m)
              first = total;
            total += counts[static_cast<size_t>(k)];
          }
          std::vector<char> input(total * esize);
          for (size_t i = 0; i < total; ++i)
            store(dtype, input.data(), i, input_value(dtype, m, i));
          const auto mine = counts[static_cast<size_t>(m)];
          std::vector<char> output(mine * esize + 1);
          element_finish finish;
          if (finish_too)
            finish = [](void* data, size_t count) {
              auto* x = static_cast<float*>(data);
              for (size_t i = 0; i < count; ++i)
                x[i] = 2 * x[i] + 1;
            };
          group.reduce_scatter(input.data(), output.data(), counts, esize,
                               reduction_of(dtype, op), finish);
          for (size_t i = 0; i < mine; ++i) {
            double want = expected_value(dtype, op, members, first + i);
            if (finish_too)
              want = 2 * want + 1;
            const double got = load(dtype, output.data(), i);
            if (got != want && wrong++ < 5)
              std::fprintf(stderr, "member %d: %s %s element %zu of its share: %g, expected %g\n",
                           m, to_string(dtype), to_string(op), i, got, want);
          }
          if (wrong == 0 && output.back() != 0 && wrong++ < 5)
            std::fprintf(stderr, "member %d: wrote past its share\n", m);
        }
      }
    }
    return (wrong == 0 && allreduce_out_of_step(group, m, members, "reduce-scatters") == 0) ? 0 : 1;
  });
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

} // namespace
} // namespace troupe::backends
