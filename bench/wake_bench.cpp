// What one thread hand-off costs on this host: the floor under every hop
// of a small collective's path (issue "Performance", items 1 and 4).
//
//   wake_bench [--trips N] [--json PATH]
//
// Round trips between two sides, each median halved into one hop:
//   process-futex  two processes, each sleeping on a shared word until the
//                  other changes it (the control channel's readers, the
//                  shm barrier after its spin)
//   process-spin   the same, both spinning (what raw MPI does in a call)
//   one-cpu-futex  two threads of one process pinned to one CPU, each
//                  sleeping until the other changes the word (a hop
//                  between the threads of a rank bound to its CPU,
//                  troupe-run --cpu-binding: every hop is a switch)
//   caf-actor      a foreign thread sends to a CAF actor, configured as a
//                  rank's runtime (2 threads, no idle sleep), that answers
//                  by a futex wake (a reader thread -> negotiator hop, then
//                  a backend -> caller completion)
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "ipc/futex.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
constexpr auto wait_slice = std::chrono::seconds(1);

struct shared_words {
  std::atomic<uint32_t> turn{0};  // odd: the far side's move
};

// Waits until `*word` is no longer `seen`, sleeping or spinning; gives up
// (returns false) after 10 s, so a side that died cannot hang the bench.
bool await_change(std::atomic<uint32_t>& word, uint32_t seen, bool spin) {
  const auto deadline = clock_type::now() + std::chrono::seconds(10);
  while (word.load(std::memory_order_acquire) == seen) {
    if (clock_type::now() > deadline)
      return false;
    if (spin)
      troupe::ipc::cpu_relax();
    else
      troupe::ipc::futex_wait(&word, seen, wait_slice);
  }
  return true;
}

void hand_over(std::atomic<uint32_t>& word, uint32_t to, bool spin) {
  word.store(to, std::memory_order_release);
  if (!spin)
    troupe::ipc::futex_wake_all(&word);
}

// The far side of `trips` round trips on `w`: false once the near side
// stopped handing over.
bool answer_trips(shared_words& w, int trips, bool spin) {
  for (uint32_t t = 1; t < 2u * static_cast<uint32_t>(trips); t += 2) {
    if (!await_change(w.turn, t - 1, spin))
      return false;
    hand_over(w.turn, t + 1, spin);
  }
  return true;
}

// The near side: each round trip's seconds, fewer than `trips` if the far
// side stopped answering.
std::vector<double> time_trips(shared_words& w, int trips, bool spin) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(trips));
  for (uint32_t t = 1; t < 2u * static_cast<uint32_t>(trips); t += 2) {
    const auto start = clock_type::now();
    hand_over(w.turn, t, spin);
    if (!await_change(w.turn, t, spin))
      break;
    out.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
  }
  return out;
}

// Round trips between this process and a forked one, in seconds each.
std::vector<double> process_trips(int trips, bool spin) {
  void* mem = mmap(nullptr, sizeof(shared_words), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  auto* w = new (mem) shared_words;
  const pid_t child = fork();
  if (child == 0)
    _exit(answer_trips(*w, trips, spin) ? 0 : 2);
  auto out = time_trips(*w, trips, spin);
  if (out.size() != static_cast<size_t>(trips)) {
    std::fprintf(stderr, "wake_bench: the other process stopped answering\n");
    std::exit(1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  munmap(mem, sizeof(shared_words));
  return out;
}

// Round trips between this thread and another, both on the CPU this one
// runs on now; the caller's affinity is restored afterwards.
std::vector<double> one_cpu_trips(int trips) {
  cpu_set_t before;
  CPU_ZERO(&before);
  sched_getaffinity(0, sizeof before, &before);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) {
    std::perror("sched_setaffinity");
    std::exit(1);
  }
  shared_words w;
  bool far_ok = true;
  // Inherits the one-CPU affinity.
  std::thread far([&] { far_ok = answer_trips(w, trips, false); });
  auto out = time_trips(w, trips, false);
  far.join();
  sched_setaffinity(0, sizeof before, &before);
  if (!far_ok || out.size() != static_cast<size_t>(trips)) {
    std::fprintf(stderr, "wake_bench: the other thread stopped answering\n");
    std::exit(1);
  }
  return out;
}

// Round trips from this thread to a CAF actor and back by a futex wake.
std::vector<double> actor_trips(int trips) {
  caf::actor_system_config cfg;
  // As workers/runtime.cpp configures a rank's actor system.
  cfg.set("scheduler.max-threads", size_t{2});
  cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{0});
  caf::actor_system sys{cfg};
  shared_words w;
  auto echo = sys.spawn([&w](caf::event_based_actor*) -> caf::behavior {
    return {[&w](uint32_t t) { hand_over(w.turn, t + 1, false); }};
  });
  std::vector<double> out;
  out.reserve(static_cast<size_t>(trips));
  for (uint32_t t = 1; t < 2u * static_cast<uint32_t>(trips); t += 2) {
    const auto start = clock_type::now();
    w.turn.store(t, std::memory_order_release);
    caf::anon_send(echo, t);
    if (!await_change(w.turn, t, false)) {
      std::fprintf(stderr, "wake_bench: the actor stopped answering\n");
      std::exit(1);
    }
    out.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
  }
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return out;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

} // namespace

int main(int argc, char** argv) {
  int trips = 20000;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--trips" && i + 1 < argc)
      trips = std::max(1, std::atoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else {
      std::fprintf(stderr, "usage: wake_bench [--trips N] [--json PATH]\n");
      return 2;
    }
  }
  struct row {
    const char* mode;
    std::vector<double> trips;
  };
  std::vector<row> rows;
  rows.push_back({"process-futex", process_trips(trips, false)});
  rows.push_back({"process-spin", process_trips(trips, true)});
  rows.push_back({"one-cpu-futex", one_cpu_trips(trips)});
  rows.push_back({"caf-actor", actor_trips(trips)});
  std::printf("| mode | round trips | round trip p10 / median / p90 (us) | one hop, median (us) |\n"
              "|---|---|---|---|\n");
  for (const auto& r : rows)
    std::printf("| %s | %zu | %.2f / %.2f / %.2f | %.2f |\n", r.mode, r.trips.size(),
                quantile(r.trips, 0.1) * 1e6, quantile(r.trips, 0.5) * 1e6,
                quantile(r.trips, 0.9) * 1e6, quantile(r.trips, 0.5) * 1e6 / 2);
  if (json.empty())
    return 0;
  std::FILE* f = std::fopen(json.c_str(), "w");
  if (!f) {
    std::perror(json.c_str());
    return 1;
  }
  std::fprintf(f, "{\"trips\": %d, \"rows\": [", trips);
  for (size_t i = 0; i < rows.size(); ++i)
    std::fprintf(f, "%s\n {\"mode\": \"%s\", \"p10_us\": %.3f, \"median_us\": %.3f, \"p90_us\": %.3f}",
                 i ? "," : "", rows[i].mode, quantile(rows[i].trips, 0.1) * 1e6,
                 quantile(rows[i].trips, 0.5) * 1e6, quantile(rows[i].trips, 0.9) * 1e6);
  std::fprintf(f, "]}\n");
  std::fclose(f);
  return 0;
}
