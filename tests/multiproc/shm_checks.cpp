#include "shm_checks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

#include "backends/cpu/arith.hpp"
#include "ipc/shm_segment.hpp"
#include "troupe/troupe.hpp"

namespace troupe::test {

namespace {

// Input of `rank` at element i of check `tag`: small integers (in [-3, 3]
// for a product), so that any order of reduction gives the exact result in
// every dtype below, float16 and bfloat16 included.
double input(unsigned tag, int rank, size_t i, data_type t, reduce_op op) {
  const uint64_t h = (i * 2654435761u + static_cast<uint64_t>(rank) * 40503u + tag * 97u) >> 7;
  const int span = op == reduce_op::product ? 3 : 30;
  const int v = static_cast<int>(h % (2 * span + 1)) - span;
  return t == data_type::uint8 ? std::abs(v) : v;
}

double combine(double a, double b, reduce_op op) {
  return op == reduce_op::min ? std::min(a, b) : op == reduce_op::product ? a * b : a + b;
}

void store_values(const std::vector<double>& v, data_type t, std::vector<char>& bytes) {
  if (backends::is_half(t)) {
    const std::vector<float> f(v.begin(), v.end());
    backends::float_to_half(t, f.data(), bytes.data(), f.size());
    return;
  }
  backends::with_element_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    for (size_t i = 0; i < v.size(); ++i)
      reinterpret_cast<T*>(bytes.data())[i] = static_cast<T>(v[i]);
  });
}

std::vector<double> load_values(const std::vector<char>& bytes, data_type t) {
  const size_t n = bytes.size() / element_size(t);
  if (backends::is_half(t)) {
    std::vector<float> f(n);
    backends::half_to_float(t, bytes.data(), f.data(), n);
    return {f.begin(), f.end()};
  }
  std::vector<double> v(n);
  backends::with_element_type(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    for (size_t i = 0; i < n; ++i)
      v[i] = static_cast<double>(reinterpret_cast<const T*>(bytes.data())[i]);
  });
  return v;
}

// "" when the allreduce of check `tag` gave the exact result.
std::string check_one(unsigned tag, int rank, int size, data_type t, reduce_op op, size_t n) {
  std::vector<double> mine(n);
  for (size_t i = 0; i < n; ++i)
    mine[i] = input(tag, rank, i, t, op);
  std::vector<char> bytes(n * element_size(t));
  store_values(mine, t, bytes);
  const tensor view{bytes.data(), t, {static_cast<int64_t>(n)}};
  const auto name = "shm-size." + std::to_string(tag);
  if (auto s = allreduce(view, view, name, op).wait_for(std::chrono::seconds(60)); !s.ok())
    return s.message();
  const auto got = load_values(bytes, t);
  for (size_t i = 0; i < n; ++i) {
    double want = input(tag, 0, i, t, op);
    for (int r = 1; r < size; ++r)
      want = combine(want, input(tag, r, i, t, op), op);
    if (got[i] != want)
      return "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", want " +
             std::to_string(want);
  }
  return {};
}

// Byte i of `rank`'s data in broadcast / allgather check `tag`.
char byte_of(unsigned tag, int rank, size_t i) {
  return static_cast<char>((i * 131 + static_cast<size_t>(rank) * 29 + tag * 7) % 251);
}

// "" when a broadcast of `n` bytes from `root` (check `tag`) arrived whole.
std::string check_broadcast(unsigned tag, int rank, int root, size_t n) {
  std::vector<char> bytes(n, static_cast<char>(0x5a));
  if (rank == root)
    for (size_t i = 0; i < n; ++i)
      bytes[i] = byte_of(tag, root, i);
  const tensor view{bytes.data(), data_type::uint8, {static_cast<int64_t>(n)}};
  const auto name = "shm-broadcast." + std::to_string(tag);
  if (auto s = broadcast(view, root, name).wait_for(std::chrono::seconds(60)); !s.ok())
    return s.message();
  for (size_t i = 0; i < n; ++i)
    if (bytes[i] != byte_of(tag, root, i))
      return "byte " + std::to_string(i) + " differs from the root's";
  return {};
}

// "" when an allgather of rows(r) rows of 3 bytes from each rank r (check
// `tag`) gave every rank's rows in rank order.
std::string check_allgather(unsigned tag, int rank, int size,
                            const std::function<size_t(int)>& rows) {
  constexpr size_t row = 3;
  std::vector<char> mine(rows(rank) * row);
  for (size_t i = 0; i < mine.size(); ++i)
    mine[i] = byte_of(tag, rank, i);
  const tensor view{mine.data(), data_type::uint8,
                    {static_cast<int64_t>(rows(rank)), static_cast<int64_t>(row)}};
  auto h = allgather(view, "shm-allgather." + std::to_string(tag));
  if (auto s = h.wait_for(std::chrono::seconds(60)); !s.ok())
    return s.message();
  const auto& got = h.output();
  size_t at = 0;
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < rows(r) * row; ++i, ++at)
      if (at >= got.size() || got[at] != byte_of(tag, r, i))
        return "byte " + std::to_string(i) + " of rank " + std::to_string(r) + "'s rows differs";
  if (at != got.size())
    return std::to_string(got.size()) + " bytes, want " + std::to_string(at);
  return {};
}

// "" when an alltoall in which rank `from` sends rows(from, to) rows of 3
// bytes to rank `to` (check `tag`) gave this rank every peer's rows in
// rank order, and their counts.
std::string check_alltoall(unsigned tag, int rank, int size,
                           const std::function<size_t(int, int)>& rows) {
  constexpr size_t row = 3;
  std::vector<char> mine;
  std::vector<int64_t> splits;
  size_t total_rows = 0;
  for (int to = 0; to < size; ++to) {
    splits.push_back(static_cast<int64_t>(rows(rank, to)));
    total_rows += rows(rank, to);
    for (size_t i = 0; i < rows(rank, to) * row; ++i)
      mine.push_back(byte_of(tag, rank * size + to, i));
  }
  const tensor view{mine.data(), data_type::uint8,
                    {static_cast<int64_t>(total_rows), static_cast<int64_t>(row)}};
  auto h = alltoall(view, "shm-alltoall." + std::to_string(tag), splits);
  if (auto s = h.wait_for(std::chrono::seconds(60)); !s.ok())
    return s.message();
  const auto& got = h.output();
  size_t at = 0;
  for (int from = 0; from < size; ++from) {
    if (h.received_splits().at(static_cast<size_t>(from)) !=
        static_cast<int64_t>(rows(from, rank)))
      return "rank " + std::to_string(from) + "'s row count differs";
    for (size_t i = 0; i < rows(from, rank) * row; ++i, ++at)
      if (at >= got.size() || got[at] != byte_of(tag, from * size + rank, i))
        return "byte " + std::to_string(i) + " from rank " + std::to_string(from) + " differs";
  }
  if (at != got.size())
    return std::to_string(got.size()) + " bytes, want " + std::to_string(at);
  return {};
}

double now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace

int run_shm_size_checks(int rank, int size) {
  constexpr size_t round = size_t{256} << 10, whole_round = size_t{16} << 10;
  const data_type dtypes[] = {data_type::uint8,   data_type::int32,    data_type::int64,
                              data_type::float16, data_type::bfloat16, data_type::float32,
                              data_type::float64};
  const auto start = std::chrono::steady_clock::now();
  unsigned tag = 0;
  int failed = 0;
  for (auto t : dtypes) {
    const size_t e = element_size(t);
    // The last two cross a chunk of the backend's (1 MiB through the
    // segment): a whole chunk and a short one, and two and a half chunks.
    const size_t bytes[] = {e,         whole_round - e, whole_round + e,   round - e,
                            round,     round + e,       5 * round / 2 + 3 * e,
                            4 * round + 3 * e,          10 * round + e};
    for (auto op : {reduce_op::sum, reduce_op::min, reduce_op::product})
      for (size_t b : bytes) {
        const auto err = check_one(++tag, rank, size, t, op, b / e);
        if (!err.empty()) {
          ++failed;
          std::printf("rank %d: FAIL shm allreduce %s %s of %zu bytes: %s\n", rank, to_string(t),
                      to_string(op), b, err.c_str());
        }
      }
  }
  const unsigned allreduces = tag;
  // Broadcasts from every root and allgathers of unequal parts (one rank's
  // empty), of sizes around the segment's rounds, between allreduces.
  for (size_t b : {size_t{1}, whole_round + 1, round - 1, round, 4 * round + 3})
    for (int root = 0; root < size; ++root) {
      const auto err = check_broadcast(++tag, rank, root, b);
      if (!err.empty()) {
        ++failed;
        std::printf("rank %d: FAIL shm broadcast of %zu bytes from %d: %s\n", rank, b, root,
                    err.c_str());
      }
      if (!check_one(++tag, rank, size, data_type::float32, reduce_op::sum, 7).empty())
        ++failed;
    }
  for (size_t most : {size_t{1}, round / 3 + 1, 3 * round / 3 + 5}) {
    const auto rows = [&](int r) { return r == 1 ? size_t{0} : most / static_cast<size_t>(r + 1); };
    const auto err = check_allgather(++tag, rank, size, rows);
    if (!err.empty()) {
      ++failed;
      std::printf("rank %d: FAIL shm allgather of up to %zu rows: %s\n", rank, most,
                  err.c_str());
    }
  }
  // Alltoalls whose blocks differ per pair, one rank's to the next empty,
  // one pair's several rounds long.
  for (size_t most : {size_t{1}, round / 3 + 1}) {
    const auto rows = [&](int from, int to) {
      return to == (from + 1) % size ? size_t{0} : most / static_cast<size_t>(1 + from + 2 * to);
    };
    const auto err = check_alltoall(++tag, rank, size, rows);
    if (!err.empty()) {
      ++failed;
      std::printf("rank %d: FAIL shm alltoall of up to %zu rows: %s\n", rank, most, err.c_str());
    }
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  if (failed == 0)
    std::printf("rank %d: PASS %u allreduces of 1 B to 10 rounds, exact, then broadcasts, "
                "allgathers and alltoalls around the rounds, %u checks in %.3f s\n",
                rank, allreduces, tag, took.count());
  std::fflush(stdout);
  return failed == 0 ? 0 : 1;
}

void run_shm_orphans(int rank) {
  std::vector<ipc::shm_segment> kept;
  for (const char* kind : {"ctl-", "data-"}) {
    kept.push_back(ipc::shm_segment::create(ipc::fresh_segment_name(kind), 4096));
    std::printf("rank %d: ORPHAN %s\n", rank, kept.back().name().c_str());
  }
  std::fflush(stdout);
  std::raise(SIGKILL);
  std::abort();  // not reached
}

std::string mapped_shm_segment(const std::string& kind) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    // "START-END PERMS OFFSET DEV INODE /dev/shm/troupe-<kind>... (deleted)"
    const auto at = line.find("/dev/shm/troupe-" + kind);
    if (at == std::string::npos)
      continue;
    std::istringstream fields(line);
    std::string range;
    fields >> range;
    const auto dash = range.find('-');
    const auto bytes = std::stoull(range.substr(dash + 1), nullptr, 16) -
                       std::stoull(range.substr(0, dash), nullptr, 16);
    const auto name = line.substr(at + 8, line.find(' ', at) - at - 8);
    return name + " " + std::to_string(bytes);
  }
  return {};
}

int run_shm_kill(int rank, int size, int victim, const std::string& stamp_file,
                 bool fds_held) {
  // troupe-run stops the survivors once the victim is gone; let them report.
  std::signal(SIGTERM, SIG_IGN);
  constexpr size_t count = 4u << 20;  // 16 MiB of float32: 64 rounds
  std::vector<float> data(count);
  const tensor t{data.data(), data_type::float32, {static_cast<int64_t>(count)}};
  const float want = static_cast<float>(size * (size + 1) / 2);
  std::atomic<int> submitted{0};
  auto step = [&](int i) {
    std::fill(data.begin(), data.end(), static_cast<float>(rank + 1));
    auto h = allreduce(t, t, "kill-loop." + std::to_string(i % 2));
    submitted = i + 1;
    auto s = h.wait_for(std::chrono::seconds(60));
    if (s.ok() && (data.front() != want || data.back() != want))
      std::printf("rank %d: FAIL allreduce %d gave %g, want %g\n", rank, i,
                  static_cast<double>(data.front()), static_cast<double>(want));
    return s;
  };
  // Joined: every rank holds the segment from here on.
  if (auto s = step(0); !s.ok()) {
    std::printf("rank %d: FAIL first allreduce: %s\n", rank, s.message().c_str());
    return 1;
  }
  const auto segment = mapped_shm_segment("data-");
  std::printf("rank %d: pid %d segment %s\n", rank, static_cast<int>(::getpid()),
              segment.empty() ? "none" : segment.c_str());
  std::fflush(stdout);
  if (rank == victim) {
    std::thread([stamp_file, fds_held, &submitted] {
      // 300 ms in, 5 ms after the next submission: the ranks submit in
      // step, so by then every rank is inside that allreduce's 64 rounds
      // (tens of ms), past its negotiation.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const int seen = submitted;
      while (submitted == seen)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (fds_held && ::fork() == 0) {
        // As a DataLoader worker would: a child that keeps the rank's
        // sockets open (only its output goes, so the launcher's forwarding
        // ends with the job), for 3 s. Async-signal-safe calls only.
        const int null = ::open("/dev/null", O_RDWR);
        for (int fd = 0; fd < 3; ++fd)
          ::dup2(null, fd);
        ::sleep(3);
        ::_exit(0);
      }
      std::ofstream(stamp_file) << std::to_string(now_seconds()) << "\n";
      std::raise(SIGKILL);
    }).detach();
  }
  status s;
  int done = 1;
  // Bounded: the victim dies 300 ms in; 10000 steps would take minutes.
  for (; done < 10000 && (s = step(done)).ok(); ++done) {
  }
  const double failed_at = now_seconds();
  double stamped = 0;
  std::ifstream(stamp_file) >> stamped;
  std::printf("rank %d: FAILED-AFTER %.3f s, %d allreduces done (%s): %s\n", rank,
              failed_at - stamped, done, to_string(s.code()), s.message().c_str());
  std::fflush(stdout);
  shutdown();
  std::printf("rank %d: SHUT-DOWN after %.3f s\n", rank, now_seconds() - stamped);
  std::fflush(stdout);
  return s.ok() ? 1 : 3;
}

} // namespace troupe::test
