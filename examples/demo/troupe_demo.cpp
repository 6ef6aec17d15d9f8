// troupe-demo: allreduce, allgather and broadcast on random data. Every rank
// regenerates every other rank's seeded input, computes the expected result
// locally and prints one verdict line. Exit status 0 only when all match.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "troupe/troupe.hpp"

namespace {

constexpr unsigned seed = 20261121;

std::vector<float> random_floats(int rank, size_t n) {
  std::mt19937 gen(seed + static_cast<unsigned>(rank));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v)
    x = dist(gen);
  return v;
}

std::vector<int64_t> random_ints(int rank, size_t n) {
  std::mt19937_64 gen(seed * 7 + static_cast<unsigned>(rank));
  std::uniform_int_distribution<int64_t> dist(-1000, 1000);
  std::vector<int64_t> v(n);
  for (auto& x : v)
    x = dist(gen);
  return v;
}

bool close(float a, float b) {
  return std::fabs(a - b) <= 1e-5f * (1.0f + std::fabs(b));
}

// Sum of every rank's floats.
bool check_allreduce(int rank, int size) {
  const size_t n = 1000;
  auto data = random_floats(rank, n);
  std::vector<float> out(n);
  auto h = troupe::allreduce({data.data(), troupe::data_type::float32, {10, 100}},
                             {out.data(), troupe::data_type::float32, {10, 100}},
                             "demo.allreduce");
  if (auto s = h.wait(); !s.ok()) {
    std::printf("rank %d: allreduce failed: %s\n", rank, s.message().c_str());
    return false;
  }
  std::vector<float> expected(n, 0.0f);
  for (int r = 0; r < size; ++r) {
    auto theirs = random_floats(r, n);
    for (size_t i = 0; i < n; ++i)
      expected[i] += theirs[i];
  }
  for (size_t i = 0; i < n; ++i)
    if (!close(out[i], expected[i]))
      return false;
  return true;
}

// Rank r contributes r + 1 rows of 3 int64 values.
bool check_allgather(int rank, int size) {
  const int64_t cols = 3;
  auto mine = random_ints(rank, static_cast<size_t>((rank + 1) * cols));
  auto h = troupe::allgather({mine.data(), troupe::data_type::int64, {rank + 1, cols}},
                             "demo.allgather");
  if (auto s = h.wait(); !s.ok()) {
    std::printf("rank %d: allgather failed: %s\n", rank, s.message().c_str());
    return false;
  }
  std::vector<int64_t> expected;
  for (int r = 0; r < size; ++r) {
    auto theirs = random_ints(r, static_cast<size_t>((r + 1) * cols));
    expected.insert(expected.end(), theirs.begin(), theirs.end());
  }
  const auto& bytes = h.output();
  const int64_t rows = static_cast<int64_t>(size) * (size + 1) / 2;
  return h.output_shape() == troupe::shape_t{rows, cols} &&
         bytes.size() == expected.size() * sizeof(int64_t) &&
         std::equal(expected.begin(), expected.end(),
                    reinterpret_cast<const int64_t*>(bytes.data()));
}

// The last rank's floats reach everyone.
bool check_broadcast(int rank, int size) {
  const int root = size - 1;
  auto data = random_floats(rank + 100, 257);
  auto h = troupe::broadcast({data.data(), troupe::data_type::float32, {257}}, root,
                             "demo.broadcast");
  if (auto s = h.wait(); !s.ok()) {
    std::printf("rank %d: broadcast failed: %s\n", rank, s.message().c_str());
    return false;
  }
  return data == random_floats(root + 100, 257);
}

} // namespace

int main() {
  if (auto s = troupe::init(); !s.ok()) {
    std::fprintf(stderr, "troupe-demo: init failed: %s\n", s.message().c_str());
    return 1;
  }
  const int rank = troupe::rank();
  const int size = troupe::size();
  const bool allreduce_ok = check_allreduce(rank, size);
  const bool allgather_ok = check_allgather(rank, size);
  const bool broadcast_ok = check_broadcast(rank, size);
  const bool all_ok = allreduce_ok && allgather_ok && broadcast_ok;
  std::printf("rank %d of %d: allreduce %s, allgather %s, broadcast %s => %s\n", rank, size,
              allreduce_ok ? "ok" : "WRONG", allgather_ok ? "ok" : "WRONG",
              broadcast_ok ? "ok" : "WRONG", all_ok ? "VERIFIED" : "FAILED");
  std::fflush(stdout);
  troupe::shutdown();
  return all_ok ? 0 : 1;
}
