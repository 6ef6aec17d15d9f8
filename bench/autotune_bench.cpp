// autotune_bench: Troupe with autotuning against a sweep of hand-picked
// settings and raw MPI issuing the allreduces one by one, all in one job of
// 2 ranks, for the ResNet-50 gradient mix and 200 x 4 KiB per step:
//   troupe-run --mpi -np 2 autotune_bench [--steps N] [--log-dir DIR]
// Per workload: init() with TROUPE_AUTOTUNE=1, steps until the tuner's CSV
// (rank 0 is the coordinator) holds its final row, then N timed steps with
// the frozen setting, shutdown(). Then init() without autotuning and, per
// workload, N timed steps of each hand-picked setting (troupe::tune) and of
// raw MPI_Allreduce. Prints one table row per measurement (median step
// time) and the tuner's result; TROUPE_LOG_LEVEL=info adds the tuner's own
// log (its "best params" line says how long choosing settings took).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/raw_peers.hpp"
#include "bench/troupe_contender.hpp"
#include "bench/workloads.hpp"
#include "troupe/troupe.hpp"

namespace {

using namespace troupe::bench;
using clock_type = std::chrono::steady_clock;

// Settings the tuner is compared with: fusion from none to Horovod's 128 MiB
// default, event-driven; two with a cycle time.
struct hand_picked {
  int64_t fusion;
  double cycle_ms;
};
const hand_picked sweep[] = {{0, 0},         {64 << 10, 0}, {256 << 10, 0}, {1 << 20, 0},
                             {4 << 20, 0},   {16 << 20, 0}, {128 << 20, 0}, {1 << 20, 1},
                             {128 << 20, 1}};

struct buffers {
  std::vector<std::vector<float>> storage;
  std::vector<buffer_view> views;

  explicit buffers(const workload& w) {
    for (size_t i = 0; i < w.counts.size(); ++i) {
      storage.emplace_back(w.counts[i], 1.0f);
      views.push_back(
        {storage.back().data(), w.counts[i], false, w.name + "." + std::to_string(i)});
    }
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double timed_steps(contender& c, buffers& b, int steps) {
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) {
    const auto start = clock_type::now();
    c.allreduce_all(b.views);
    seconds.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
  }
  return median(seconds);
}

size_t csv_rows(const std::string& path) {
  std::ifstream in{path};
  size_t lines = 0;
  for (std::string line; std::getline(in, line);)
    ++lines;
  return lines > 0 ? lines - 1 : 0;  // without the header
}

// Rank 0 tells everyone whether its CSV is complete (one allreduce of a
// flag, so every rank leaves the loop at the same step).
bool tuner_done(const std::string& csv, size_t rows) {
  float flag = troupe::rank() == 0 && csv_rows(csv) >= rows ? 1.0f : 0.0f;
  const troupe::tensor t{&flag, troupe::data_type::float32, {1}};
  if (auto s = troupe::allreduce(t, t, "bench.tuner_done").wait(); !s.ok())
    throw std::runtime_error("flag allreduce failed: " + s.message());
  return flag > 0;
}

void init_or_throw() {
  if (auto s = troupe::init(); !s.ok())
    throw std::runtime_error("init failed: " + s.message());
}

int run(int steps, const std::string& log_dir) {
  const auto workloads = make_workloads(false, TROUPE_BENCH_DATA_DIR "/resnet50_gradients.txt");
  std::vector<workload> picked;
  for (const auto& w : workloads)
    if (w.name == "resnet50" || w.name == "small_tensors")
      picked.push_back(w);
  // Bayesian settings, the cache flipped, the best again.
  const char* max_samples = std::getenv("TROUPE_AUTOTUNE_BAYES_OPT_MAX_SAMPLES");
  const size_t rows = static_cast<size_t>(max_samples ? std::atoi(max_samples) : 20) + 2;
  std::vector<std::string> lines;
  for (const auto& w : picked) {
    const std::string csv = log_dir + "/autotune-" + w.name + ".csv";
    setenv("TROUPE_AUTOTUNE", "1", 1);
    setenv("TROUPE_AUTOTUNE_LOG", csv.c_str(), 1);
    init_or_throw();
    auto troupe_side = make_troupe_contender("mpi");
    buffers b{w};
    const auto start = clock_type::now();
    int converged = 0;
    const int limit = 20000;
    while (converged < limit) {
      troupe_side->allreduce_all(b.views);
      ++converged;
      if (converged % 5 == 0 && tuner_done(csv, rows))
        break;
    }
    if (converged >= limit)
      throw std::runtime_error("the tuner did not finish within " + std::to_string(limit) +
                               " steps of " + w.name);
    const double to_converge = std::chrono::duration<double>(clock_type::now() - start).count();
    const double tuned = timed_steps(*troupe_side, b, steps);
    std::string best;
    if (troupe::rank() == 0) {
      std::ifstream in{csv};
      for (std::string line; std::getline(in, line);)
        best = line;
    }
    lines.push_back(w.name + " | autotuned | " + std::to_string(tuned * 1e3) + " ms | converged after " +
                    std::to_string(converged) + " steps (" + std::to_string(to_converge) +
                    " s); best CSV row " + best);
    troupe_side.reset();
    troupe::shutdown();
  }
  setenv("TROUPE_AUTOTUNE", "0", 1);
  init_or_throw();
  auto troupe_side = make_troupe_contender("mpi");
  auto raw = make_raw_peer(troupe::rank(), troupe::size());
  for (const auto& w : picked) {
    buffers b{w};
    for (const auto& s : sweep) {
      troupe::tuning t;
      t.fusion_threshold_bytes = s.fusion;
      t.cycle_time_ms = s.cycle_ms;
      if (auto st = troupe::tune(t); !st.ok())
        throw std::runtime_error("tune failed: " + st.message());
      troupe_side->allreduce_all(b.views);  // the change applies at this step's first list
      const double m = timed_steps(*troupe_side, b, steps);
      lines.push_back(w.name + " | fusion " + std::to_string(s.fusion) + " B, cycle " +
                      std::to_string(s.cycle_ms) + " ms | " + std::to_string(m * 1e3) + " ms");
    }
    raw->allreduce_all(b.views);
    lines.push_back(w.name + " | raw MPI one by one | " +
                    std::to_string(timed_steps(*raw, b, steps) * 1e3) + " ms");
  }
  raw.reset();
  troupe_side.reset();
  if (troupe::rank() == 0)
    for (const auto& l : lines)
      std::printf("autotune_bench: %s\n", l.c_str());
  troupe::shutdown();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  int steps = 40;
  std::string log_dir = ".";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--steps")
      steps = std::atoi(argv[i + 1]);
    else if (arg == "--log-dir")
      log_dir = argv[i + 1];
  }
  if (steps < 1) {
    std::fprintf(stderr, "usage: autotune_bench [--steps N] [--log-dir DIR]\n");
    return 2;
  }
  try {
    return run(steps, log_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "autotune_bench: %s\n", e.what());
    return 1;
  }
}
