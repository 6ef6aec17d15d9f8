// allreduce_bench: Troupe's allreduce against the raw library it runs on, in
// the same processes, alternating rounds so machine noise hits both alike.
//   troupe-run --mpi  -np 2 allreduce_bench   Troupe (mpi backend) vs MPI_Allreduce
//   troupe-run --gloo -np 2 allreduce_bench   Troupe (gloo backend) vs gloo::allreduce
// Rank 0 prints a markdown table (median / p90 latency, busbw as nccl-tests
// defines it: 2 (n-1) / n * bytes / time) and one JSON line per row.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "bench/raw_peers.hpp"
#include "troupe/troupe.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct sample_set {
  std::vector<double> seconds;
  double quantile(double q) {
    std::sort(seconds.begin(), seconds.end());
    return seconds[static_cast<size_t>(q * static_cast<double>(seconds.size() - 1))];
  }
};

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto secs = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
  };
  return secs(usage.ru_utime) + secs(usage.ru_stime);
}

// Share of one core the whole process uses while nothing is submitted.
double idle_cpu_share(std::chrono::seconds window) {
  const double before = cpu_seconds();
  std::this_thread::sleep_for(window);
  return (cpu_seconds() - before) / static_cast<double>(window.count());
}

int iterations_for(size_t bytes) {
  if (bytes <= (64u << 10))
    return 200;
  if (bytes <= (1u << 20))
    return 50;
  return 8;
}

} // namespace

int main() {
  if (auto s = troupe::init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.message().c_str());
    return 1;
  }
  const int rank = troupe::rank(), size = troupe::size();
  const char* backend_env = std::getenv("TROUPE_CPU_OPERATIONS");
  const std::string backend = backend_env ? backend_env : "gloo";
  auto raw = troupe::bench::make_raw_peer(backend);
  const std::vector<size_t> sizes{4, 1u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20};
  const int rounds = 5;
  std::map<std::pair<std::string, size_t>, sample_set> samples;
  for (size_t bytes : sizes) {
    std::vector<float> buf(std::max<size_t>(bytes / 4, 1), 1.0f);
    const troupe::tensor t{buf.data(), troupe::data_type::float32,
                           {static_cast<int64_t>(buf.size())}};
    const int iters = iterations_for(bytes);
    for (int round = 0; round < rounds; ++round) {
      for (int impl = 0; impl < 2; ++impl) {
        const bool use_troupe = (impl + round) % 2 == 0;  // alternate who goes first
        const std::string name = use_troupe ? "troupe-" + backend : "raw-" + backend;
        for (int i = 0; i < iters; ++i) {
          const auto start = clock_type::now();
          if (use_troupe)
            troupe::allreduce(t, t, "bench").wait();
          else
            raw->allreduce(buf.data(), buf.size());
          samples[{name, bytes}].seconds.push_back(
            std::chrono::duration<double>(clock_type::now() - start).count());
        }
      }
    }
  }
  const double idle = idle_cpu_share(std::chrono::seconds(3));
  if (rank == 0) {
    std::printf("idle runtime (troupe-%s, nothing submitted for 3 s): %.2f %% of a core\n",
                backend.c_str(), idle * 100);
    std::printf("| impl | bytes | median us | p90 us | busbw GB/s | troupe / raw |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (size_t bytes : sizes) {
      const double raw_median = samples[{"raw-" + backend, bytes}].quantile(0.5);
      for (const auto& name : {"troupe-" + backend, "raw-" + backend}) {
        auto& s = samples[{name, bytes}];
        const double median = s.quantile(0.5), p90 = s.quantile(0.9);
        const double busbw = 2.0 * (size - 1) / size * static_cast<double>(bytes) / median / 1e9;
        std::printf("| %s | %zu | %.1f | %.1f | %.2f | %.2f |\n", name.c_str(), bytes,
                    median * 1e6, p90 * 1e6, busbw, median / raw_median);
      }
    }
    for (size_t bytes : sizes)
      for (const auto& name : {"troupe-" + backend, "raw-" + backend}) {
        auto& s = samples[{name, bytes}];
        std::printf("{\"impl\": \"%s\", \"bytes\": %zu, \"ranks\": %d, \"median_s\": %.9f, "
                    "\"p90_s\": %.9f}\n",
                    name.c_str(), bytes, size, s.quantile(0.5), s.quantile(0.9));
      }
  }
  raw.reset();
  troupe::shutdown();
  return 0;
}
