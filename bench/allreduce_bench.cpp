// allreduce_bench: one rank-0 JSON file of timings for Troupe and the raw
// library it runs on, in the same processes, rounds alternating
// which contender goes first so that machine noise hits all alike.
//   troupe-run --mpi  -np 2 allreduce_bench --json F   troupe-mpi, raw-mpi
//   troupe-run --gloo -np 2 allreduce_bench --json F   troupe-gloo, raw-gloo
// bench/run.sh runs both and torch_bench.py; bench/report.py makes the tables.
// Options: --rounds N (3), --idle-seconds S (3), --quick (smoke test sizes);
// --troupe-only / --raw-only (one contender, e.g. to compare Troupe with
// OMPI_MCA_mpi_yield_when_idle=1 against raw MPI without it: the setting
// holds for a whole process); for profiling one case: --only
// WORKLOAD[:BYTES] (e.g. allreduce:4, small_tensors), --iterations N.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "backends/cpu/arith.hpp"
#include "bench/raw_peers.hpp"
#include "bench/results.hpp"
#include "bench/troupe_contender.hpp"
#include "bench/workloads.hpp"
#include "troupe/troupe.hpp"

namespace {

using namespace troupe::bench;
using clock_type = std::chrono::steady_clock;

struct options {
  std::string json_path;
  int rounds = 3;
  int idle_seconds = 3;
  bool quick = false;
  std::string only;
  bool troupe_only = false;
  bool raw_only = false;
  int iterations = 0;  // 0: the workload's own count
};

bool selected(const options& o, const workload& w) {
  return o.only.empty() || o.only == w.name ||
         o.only == w.name + ":" + std::to_string(w.bytes());
}

options parse_options(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--json")
      o.json_path = value();
    else if (arg == "--rounds")
      o.rounds = std::stoi(value());
    else if (arg == "--idle-seconds")
      o.idle_seconds = std::stoi(value());
    else if (arg == "--quick")
      o.quick = true;
    else if (arg == "--only")
      o.only = value();
    else if (arg == "--troupe-only")
      o.troupe_only = true;
    else if (arg == "--raw-only")
      o.raw_only = true;
    else if (arg == "--iterations")
      o.iterations = std::stoi(value());
    else
      throw std::invalid_argument("unknown option " + arg);
  }
  if (o.json_path.empty())
    throw std::invalid_argument("--json PATH is required");
  if (o.idle_seconds < 1 || o.rounds < 1)
    throw std::invalid_argument("--idle-seconds and --rounds must be at least 1");
  if (o.troupe_only && o.raw_only)
    throw std::invalid_argument("--troupe-only and --raw-only exclude each other");
  return o;
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto secs = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
  };
  return secs(usage.ru_utime) + secs(usage.ru_stime);
}

// Share of one core each rank's whole process uses while nothing is
// submitted, gathered so the rank that is not the coordinator counts too.
std::vector<double> idle_cpu_shares(int seconds) {
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  double share = (cpu_seconds() - before) / seconds;
  const troupe::tensor t{&share, troupe::data_type::float64, {1}};
  auto h = troupe::allgather(t, "bench.idle");
  if (auto s = h.wait(); !s.ok())
    throw std::runtime_error("allgather of idle shares failed: " + s.message());
  std::vector<double> all(static_cast<size_t>(troupe::size()));
  std::memcpy(all.data(), h.output().data(), all.size() * sizeof(double));
  return all;
}

// The buffers of one workload, filled with rank + 1 so that the first step
// can be checked: every element must then be 1 + 2 + ... + size (exact in
// float16 too for the few ranks run here).
struct step_memory {
  bool float16;
  std::vector<std::vector<float>> storage;  // float16: half the floats hold the halves
  std::vector<buffer_view> views;

  explicit step_memory(const workload& w) : float16(w.float16) {
    for (size_t i = 0; i < w.counts.size(); ++i) {
      storage.emplace_back(float16 ? (w.counts[i] + 1) / 2 : w.counts[i]);
      views.push_back({storage.back().data(), w.counts[i], float16,
                       w.name + "." + std::to_string(w.bytes()) + "." + std::to_string(i)});
    }
  }
  void fill(float value) {
    for (size_t i = 0; i < views.size(); ++i) {
      if (!float16) {
        std::fill(storage[i].begin(), storage[i].end(), value);
        continue;
      }
      std::vector<float> values(views[i].count, value);
      troupe::backends::float_to_half(troupe::data_type::float16, values.data(), views[i].data,
                                      values.size());
    }
  }
  bool all_equal(float value) const {
    for (const auto& v : views) {
      float ends[2];
      if (float16) {
        const auto* halves = static_cast<const uint16_t*>(v.data);
        const uint16_t both[2] = {halves[0], halves[v.count - 1]};
        troupe::backends::half_to_float(troupe::data_type::float16, both, ends, 2);
      } else {
        ends[0] = static_cast<const float*>(v.data)[0];
        ends[1] = static_cast<const float*>(v.data)[v.count - 1];
      }
      if (ends[0] != value || ends[1] != value)
        return false;
    }
    return true;
  }
};

std::vector<series> measure(const workload& w, std::vector<std::unique_ptr<contender>>& contenders,
                            int rounds) {
  const int rank = troupe::rank(), size = troupe::size();
  step_memory memory{w};
  for (auto& c : contenders) {
    memory.fill(static_cast<float>(rank + 1));
    c->enter();
    c->allreduce_all(memory.views);  // also the warm-up step
    c->leave();
    if (!memory.all_equal(static_cast<float>(size * (size + 1) / 2)))
      throw std::runtime_error(c->label() + " computed a wrong sum on " + w.name);
  }
  std::vector<series> out;
  for (auto& c : contenders)
    out.push_back({c->label(), w.name, w.bytes(), w.counts.size(), {}});
  for (int round = 0; round < rounds; ++round)
    for (size_t k = 0; k < contenders.size(); ++k) {
      const size_t who = (k + static_cast<size_t>(round)) % contenders.size();
      contenders[who]->enter();
      for (int i = 0; i < w.iterations; ++i) {
        const auto start = clock_type::now();
        contenders[who]->allreduce_all(memory.views);
        out[who].seconds.push_back(
          std::chrono::duration<double>(clock_type::now() - start).count());
      }
      contenders[who]->leave();
    }
  return out;
}

int run(const options& opts) {
  const int rank = troupe::rank();
  const char* backend_env = std::getenv("TROUPE_CPU_OPERATIONS");
  // Without the host's shared segment (troupe-run --shm 0), every
  // allreduce crosses the backend's transport: labelled apart.
  const char* shm_env = std::getenv("TROUPE_SHM");
  const std::string backend =
    std::string(backend_env ? backend_env : std::getenv("OMPI_COMM_WORLD_SIZE") ? "mpi" : "gloo") +
    (shm_env && std::string(shm_env) == "0" ? "-noshm" : "");
  std::vector<std::unique_ptr<contender>> contenders;
  job_result job;  // troupe_label stays empty without Troupe: no idle share either
  if (!opts.raw_only) {
    contenders.push_back(make_troupe_contender(backend));
    job.troupe_label = contenders.front()->label();
  }
  if (!opts.troupe_only)
    contenders.push_back(make_raw_peer(rank, troupe::size()));
  job.ranks = troupe::size();
  job.rounds = opts.rounds;
  for (auto& w : make_workloads(opts.quick, TROUPE_BENCH_DATA_DIR "/resnet50_gradients.txt")) {
    if (!selected(opts, w))
      continue;
    if (opts.iterations > 0)
      w.iterations = opts.iterations;
    for (auto& s : measure(w, contenders, opts.rounds))
      job.results.push_back(std::move(s));
    if (rank == 0)
      std::fprintf(stderr, "allreduce_bench: %s %zu B done\n", w.name.c_str(), w.bytes());
  }
  if (!job.troupe_label.empty()) {
    job.idle_seconds = opts.idle_seconds;
    job.idle_cpu_share = idle_cpu_shares(opts.idle_seconds);
  }
  if (rank == 0)
    write_json(job, opts.json_path);
  contenders.clear();
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  options opts;
  try {
    opts = parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 2;
  }
  if (auto s = troupe::init(); !s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.message().c_str());
    return 1;
  }
  int rc = 1;
  try {
    rc = run(opts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
  }
  troupe::shutdown();
  return rc;
}
