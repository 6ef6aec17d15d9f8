// Process sets run concurrently (issue 6): on 4 ranks, set A = {0, 1} runs
// back-to-back 64 MiB allreduces while set B = {2, 3} measures 4-byte
// allreduce latency; B's median with A busy is compared with B's median
// with A idle. Horovod services sets one after another in one thread, so
// there B waits behind A's transfers.
//   troupe-run -np 4 --dynamic-process-sets 1 build/bin/process_set_bench [--json PATH]
// Prints a markdown table on rank 2 and, with --json, writes it there.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "troupe/troupe.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Counts, not time windows: members of a set must submit the same number
// of collectives, or the last one waits forever.
constexpr int small_count = 1000;
constexpr int big_count = 20;  // outlasts B's 1000 small ones

// B's 4-byte allreduce latencies (seconds).
std::vector<double> small_latencies(const troupe::process_set& b) {
  std::vector<double> out;
  float x = 1;
  const troupe::tensor t{&x, troupe::data_type::float32, {1}};
  for (int i = 0; i < small_count; ++i) {
    const auto start = clock_type::now();
    if (!troupe::allreduce(t, t, "b.small", troupe::reduce_op::sum, 1, 1, b).wait().ok())
      return {};
    out.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
  }
  return out;
}

// A's 64 MiB allreduces; returns the seconds they took.
double big_transfers(const troupe::process_set& a) {
  std::vector<float> big(16u << 20, 1.0f);
  const troupe::tensor t{big.data(), troupe::data_type::float32,
                         {static_cast<int64_t>(big.size())}};
  const auto start = clock_type::now();
  for (int i = 0; i < big_count; ++i)
    if (!troupe::allreduce(t, t, "a.big", troupe::reduce_op::sum, 1, 1, a).wait().ok())
      return -1;
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

} // namespace

int main(int argc, char** argv) {
  const std::string json = argc == 3 && std::string(argv[1]) == "--json" ? argv[2] : "";
  if (auto s = troupe::init(); !s.ok() || troupe::size() != 4) {
    std::fprintf(stderr, "process_set_bench: needs 4 ranks, TROUPE_DYNAMIC_PROCESS_SETS=1 (%s)\n",
                 s.message().c_str());
    return 1;
  }
  troupe::process_set a, b;
  if (!troupe::add_process_set({0, 1}, a).ok() || !troupe::add_process_set({2, 3}, b).ok()) {
    std::fprintf(stderr, "process_set_bench: cannot add the sets\n");
    return 1;
  }
  std::vector<double> idle, busy;
  double busy_seconds = 0;
  // Phase 1: A idle. Phase 2: A busy (started together by the barrier).
  if (b.included())
    idle = small_latencies(b);
  troupe::barrier().wait();
  if (b.included())
    busy = small_latencies(b);
  else
    busy_seconds = big_transfers(a);
  troupe::barrier().wait();
  if (troupe::rank() == 2) {
    const double ratio = median(busy) / median(idle);
    std::printf("| set B 4-byte allreduce | median us | samples |\n|---|---|---|\n");
    std::printf("| A idle | %.1f | %zu |\n| A running 64 MiB allreduces | %.1f | %zu |\n",
                median(idle) * 1e6, idle.size(), median(busy) * 1e6, busy.size());
    std::printf("\nbusy / idle = %.2f (target < 2)\n", ratio);
    if (!json.empty())
      std::ofstream(json) << "{\"idle_median_s\": " << median(idle)
                          << ", \"busy_median_s\": " << median(busy)
                          << ", \"idle_samples\": " << idle.size()
                          << ", \"busy_samples\": " << busy.size()
                          << ", \"ratio\": " << ratio << "}\n";
  }
  if (troupe::rank() == 0)
    std::printf("set A: %d x 64 MiB allreduces in %.2f s\n", big_count, busy_seconds);
  std::fflush(stdout);
  troupe::shutdown();
  return idle.empty() && b.included() ? 1 : 0;
}
