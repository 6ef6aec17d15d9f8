// Runs under troupe-run (or alone, as one rank) and checks collectives
// against a reference every rank computes from all ranks' seeded inputs.
//   collective_check ops [FILE] every op x dtype x reduction, per-rank random
//                               order; rank 0 writes the support matrix to FILE
//   collective_check shm-ops DATA [CONTROL]
//                               ops, allreduces of sizes around the shm
//                               path's rounds checked exactly, then checks
//                               that this rank maps a segment of the Gloo
//                               shm path (DATA 1; printed as "segment NAME
//                               BYTES") or none (DATA 0), and the global
//                               set's control channel (CONTROL 1) or none
//                               (CONTROL 0)
//   collective_check shm-kill VICTIM STAMP_FILE [fds-held]
//                               VICTIM dies (SIGKILL) in a loop of 16 MiB
//                               allreduces on the shm path (with fds-held,
//                               leaving a child that holds its sockets); the
//                               others report when and how their allreduce
//                               failed
//   collective_check many N     N small allreduces in flight at once
//   collective_check cache N    N training steps whose tensors change shape,
//                               dtype and root now and then (response cache)
//   collective_check tune N     the same, with float allreduces, while ranks
//                               take turns changing the settings (tune())
//                               every 10 steps
//   collective_check reset N    N in-place resets, each checked (epoch, an
//                               allreduce, a process set), no leaks
//   collective_check reset-after-loss VICTIM
//                               VICTIM dies in a 256 MiB allreduce; the
//                               others reset as a smaller world
//   collective_check late-set S the last rank calls add_process_set S seconds
//                               after the others; they keep calling rank()
//                               meanwhile (must stay fast); past
//                               TROUPE_START_TIMEOUT the call must fail on
//                               every rank naming the late rank
//   collective_check timeline-dynamic FILE
//                               start_timeline(FILE) / stop_timeline() around
//                               a grouped (fused) allreduce and an allgather;
//                               without TROUPE_TIMELINE, start must fail
//   collective_check process-sets
//                               4 ranks, static sets [0, 2] and [1, 3],
//                               dynamic sets, errors, add/remove leak check
//   collective_check crossing-sets
//                               5 ranks or more, dynamic sets across the
//                               control tree's branches, checked
//   collective_check errors     every user error, message checked on every rank
//   collective_check allocate   allgather / alltoall / reducescatter results in
//                               memory from an output_allocator
//   collective_check join       uneven work ending in join()
//   collective_check stall      a withheld tensor, with small stall times
//   collective_check hold N STOP_FILE
//                               N checked allreduces one after another, then
//                               stays up until STOP_FILE exists (60 s at
//                               most) so a scraper sees the final metrics
//   collective_check attacked N STOP_FILE
//                               hold, then 5 more checked allreduces (the
//                               security tests attack the ranks meanwhile)
//   collective_check set-metrics N DIR
//                               sets [0, 1] (id 1) and [1, 2, 3] (id 2) beside
//                               the global set, N 1000-byte allreduces on each
//                               set of this rank, holding; DIR/remove removes
//                               set 1, holding again until DIR/stop (a
//                               scraper checks each step; 4 ranks, dynamic
//                               process sets)
//   collective_check reinit     shutdown() and init() again (one rank): what
//                               init() holds, e.g. the metrics port, is freed
//   collective_check lose-peer kill|stop|stop-busy|stop-small VICTIM STAMP_FILE
//                               VICTIM dies (SIGKILL) or freezes (SIGSTOP)
//                               while the others wait on a collective (at the
//                               coordinator, inside the backend for
//                               stop-busy, on their negotiators' threads
//                               for stop-small); they report how fast and
//                               with what error they failed, and when their
//                               shutdown() returned
//   collective_check affinity CORES
//                               CORES has one entry per rank, a core or "-":
//                               after allreduces, one of the rank's threads
//                               runs on exactly that core only
//                               (TROUPE_THREAD_AFFINITY), or none is pinned
//   collective_check idle-wakeups
//                               after allreduces, the runtime's threads wake
//                               fewer than 40 times a second while idle
//   collective_check runtime-cpu
//                               after allreduces, the control channel's
//                               reader runs on TROUPE_RUNTIME_CPU only, and
//                               the main and backend threads where the
//                               process may (troupe-run --cpu-binding runtime);
//                               a set of up to 8 starts no transport thread
// Prints "rank R: PASS ..." per rank; exit 0 on success.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include "allocator_checks.hpp"
#include "autotune_checks.hpp"
#include "cache_checks.hpp"
#include "checks.hpp"
#include "process_set_checks.hpp"
#include "reset_checks.hpp"
#include "shm_checks.hpp"
#include "error_checks.hpp"
#include "idle_checks.hpp"
#include "thread_status.hpp"
#include "troupe/troupe.hpp"

namespace {

using troupe::data_type;

double now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Waits (60 s at most) until the victim wrote its time into `path`.
bool await_stamp(int rank, const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  double stamped = 0;
  while (!(std::ifstream(path) >> stamped)) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("rank %d: FAIL the victim never stamped %s\n", rank, path.c_str());
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

int lose_peer(int rank, const std::string& how, int victim, const std::string& stamp_file) {
  // troupe-run stops the survivors once the victim is gone; let them report.
  std::signal(SIGTERM, SIG_IGN);
  float x = 1;
  auto warm = troupe::allreduce({&x, data_type::float32, {1}}, {&x, data_type::float32, {1}},
                                "warm-up");
  // "stop-busy": the victim joins a large allreduce ("stop-busy-scatter": a
  // reducescatter) and freezes, so the others are blocked inside the
  // backend. Otherwise the victim never submits it and the others wait at
  // the coordinator.
  // "stop-small": a 4-byte allreduce, cached on the fast lane: the victim
  // posts it and freezes before the others submit it, so they agree on it
  // without the victim and block in it on their negotiators' threads (a
  // work that small runs there), out of reach of the abort messages those
  // threads would read.
  const bool scatter = how == "stop-busy-scatter";
  const bool busy = how == "stop-busy" || scatter;
  const bool small = how == "stop-small";
  std::vector<float> big(busy ? 16u << 20 : 1u, 1.0f);
  const troupe::tensor t{big.data(), data_type::float32, {static_cast<int64_t>(big.size())}};
  const auto submit_big = [&](const std::string& name) {
    return scatter ? troupe::reducescatter(t, name, troupe::reduce_op::sum)
                   : troupe::allreduce(t, t, name);
  };
  if (small)
    for (int i = 0; i < 3 && warm.wait().ok(); ++i)  // cached from the second on
      warm = submit_big("small");
  if (rank == victim) {
    if (!warm.wait().ok())
      return 1;
    if (small) {
      auto h = submit_big("small");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // posted by then
    }
    if (busy) {
      // Long enough for the request to be agreed (well under 1 ms here), short
      // against the 64 MiB allreduce (about 20 ms under MPI on 2 cores): the
      // others are then inside the backend's call when this rank freezes.
      auto h = submit_big("big");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::ofstream(stamp_file) << std::to_string(now_seconds()) << "\n";
    std::raise(how == "kill" ? SIGKILL : SIGSTOP);
    return 0;
  }
  // The victim may die before this rank saw the warm-up complete; then the
  // warm-up is the collective that must fail.
  auto s = warm.wait();
  if (s.ok() && small && !await_stamp(rank, stamp_file))
    return 1;
  if (s.ok())
    s = submit_big(busy ? "big" : small ? "small" : "never-completes")
          .wait_for(std::chrono::seconds(60));
  const double detected = now_seconds();
  double stamped = 0;
  std::ifstream(stamp_file) >> stamped;
  const bool names_victim =
    s.message().find("rank " + std::to_string(victim)) != std::string::npos;
  std::printf("rank %d: %s after %.3f s (%s): %s\n", rank,
              s.code() == troupe::status_code::peer_lost && names_victim ? "DETECTED"
                                                                          : "NOT-DETECTED",
              detected - stamped, troupe::to_string(s.code()), s.message().c_str());
  std::fflush(stdout);
  // A training script would now end; the job's launcher reaps the rest.
  troupe::shutdown();
  std::printf("rank %d: SHUT-DOWN after %.3f s\n", rank, now_seconds() - stamped);
  std::fflush(stdout);
  return 3;
}

// Flushes what this rank printed, then waits (60 s at most) for `path`.
bool await_file(int rank, const std::string& path) {
  std::fflush(stdout);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::ifstream(path)) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("rank %d: FAIL %s never appeared\n", rank, path.c_str());
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

int hold(int rank, int size, int n, const std::string& stop_file) {
  const auto start = std::chrono::steady_clock::now();
  const float expected = static_cast<float>(size * (size - 1) / 2);
  for (int i = 0; i < n; ++i) {
    float x = static_cast<float>(rank);
    const troupe::tensor t{&x, data_type::float32, {1}};
    // Ten names, reused: after the first ten, each is a response cache hit.
    auto s = troupe::allreduce(t, t, "hold." + std::to_string(i % 10)).wait();
    if (!s.ok() || x != expected) {
      std::printf("rank %d: FAIL allreduce %d: %s, got %g, expected %g\n", rank, i,
                  s.message().c_str(), static_cast<double>(x), static_cast<double>(expected));
      return 1;
    }
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf("rank %d: PASS %d allreduces in %.3f s, holding\n", rank, n, took.count());
  return await_file(rank, stop_file) ? 0 : 1;
}

int set_metrics(int rank, int n, const std::string& dir) {
  troupe::process_set global, pair, trio;
  if (!troupe::add_process_set({0, 1}, pair).ok() ||
      !troupe::add_process_set({1, 2, 3}, trio).ok() || pair.id != 1 || trio.id != 2) {
    std::printf("rank %d: FAIL sets [0, 1] and [1, 2, 3] did not get ids 1 and 2\n", rank);
    return 1;
  }
  std::vector<float> data(250, 1.0f);  // 1000 bytes
  const troupe::tensor t{data.data(), data_type::float32, {250}};
  for (const auto* set : {&global, &pair, &trio}) {
    if (set->id != 0 && !std::binary_search(set->ranks.begin(), set->ranks.end(), rank))
      continue;
    for (int i = 0; i < n; ++i) {
      auto s = troupe::allreduce(t, t, "sets." + std::to_string(i % 10),
                                 troupe::reduce_op::sum, 1.0, 1.0, *set)
                 .wait();
      std::fill(data.begin(), data.end(), 1.0f);
      if (!s.ok()) {
        std::printf("rank %d: FAIL allreduce on set %d: %s\n", rank, set->id,
                    s.message().c_str());
        return 1;
      }
    }
  }
  std::printf("rank %d: PASS %d allreduces per set, holding\n", rank, n);
  if (!await_file(rank, dir + "/remove"))
    return 1;
  const auto removed = troupe::remove_process_set(pair);
  std::printf("rank %d: %s set 1 removed (%s), holding\n", rank, removed.ok() ? "PASS" : "FAIL",
              removed.message().c_str());
  return removed.ok() && await_file(rank, dir + "/stop") ? 0 : 1;
}

// Sets whose members lie on different branches of the control tree, with
// coordinators that are not its root: {2, size - 2, size - 1}, the odd
// ranks, and every rank but 0. Twenty allreduces on each set a rank belongs to
// (cached after the first), checked, then the sets are removed.
int crossing_sets(int rank, int size) {
  std::vector<int> all_but_first, odd;
  for (int r = 1; r < size; ++r) {
    all_but_first.push_back(r);
    if (r % 2 == 1)
      odd.push_back(r);
  }
  // The smallest first: no earlier set's messages teach the ranks between
  // its members the way (see control_links::set_contacts).
  const std::vector<std::vector<int>> lists{{2, size - 2, size - 1}, odd, all_but_first};
  std::vector<troupe::process_set> sets(lists.size());
  for (size_t i = 0; i < lists.size(); ++i)
    if (auto s = troupe::add_process_set(lists[i], sets[i]); !s.ok()) {
      std::printf("rank %d: FAIL add_process_set %zu: %s\n", rank, i, s.message().c_str());
      return 1;
    }
  for (size_t i = 0; i < lists.size(); ++i) {
    const auto& members = lists[i];
    if (!std::binary_search(members.begin(), members.end(), rank))
      continue;
    const float expected = static_cast<float>(std::accumulate(members.begin(), members.end(), 0));
    for (int step = 0; step < 20; ++step) {
      float x = static_cast<float>(rank);
      const troupe::tensor t{&x, data_type::float32, {1}};
      auto s = troupe::allreduce(t, t, "crossing." + std::to_string(step % 5),
                                 troupe::reduce_op::sum, 1.0, 1.0, sets[i])
                 .wait();
      if (!s.ok() || x != expected) {
        std::printf("rank %d: FAIL allreduce %d on set %d: %s, got %g, expected %g\n", rank,
                    step, sets[i].id, s.message().c_str(), static_cast<double>(x),
                    static_cast<double>(expected));
        return 1;
      }
    }
  }
  for (auto& set : sets)
    if (auto s = troupe::remove_process_set(set); !s.ok()) {
      std::printf("rank %d: FAIL remove_process_set %d: %s\n", rank, set.id, s.message().c_str());
      return 1;
    }
  std::printf("rank %d: PASS crossing process sets\n", rank);
  return 0;
}

std::vector<std::string> thread_cores() {
  std::vector<std::string> out;
  for (const auto& t : troupe::test::thread_statuses())
    out.push_back(t.cpus);
  return out;
}

int affinity(int rank, int size, const std::string& cores) {
  std::vector<std::string> want;
  for (size_t at = 0; at <= cores.size();) {
    const auto end = std::min(cores.find(',', at), cores.size());
    want.push_back(cores.substr(at, end - at));
    at = end + 1;
  }
  if (want.size() != static_cast<size_t>(size)) {
    std::printf("rank %d: FAIL affinity wants one entry per rank\n", rank);
    return 1;
  }
  if (!troupe::test::allreduce_series(rank, size, "pinned", 5)) {
    std::printf("rank %d: FAIL allreduce\n", rank);
    return 1;
  }
  const auto threads = thread_cores();
  const auto& mine = want[static_cast<size_t>(rank)];
  std::string seen;
  for (const auto& t : threads)
    seen += (seen.empty() ? "" : " ") + t;
  bool ok = false;
  if (mine == "-")  // every thread may run where the process may
    ok = std::all_of(threads.begin(), threads.end(), [&](auto& t) { return t == threads[0]; });
  else  // (the process itself runs on more than that one core)
    ok = threads[0] != mine && std::find(threads.begin() + 1, threads.end(), mine) != threads.end();
  std::printf("rank %d: %s thread affinity %s (threads' cores: %s)\n", rank, ok ? "PASS" : "FAIL",
              mine.c_str(), seen.c_str());
  return ok ? 0 : 1;
}

// The backend's one thread: a set of up to 8 members links every pair and
// runs its links on that thread (Gloo's transport, whose network thread
// would inherit its name, is made only for larger sets).
int runtime_cpu(int rank, int size) {
  const char* cpu = std::getenv("TROUPE_RUNTIME_CPU");
  if (!cpu || !troupe::test::allreduce_series(rank, size, "runtime", 5)) {
    std::printf("rank %d: FAIL no TROUPE_RUNTIME_CPU, or an allreduce failed\n", rank);
    return 1;
  }
  const auto threads = troupe::test::thread_statuses();
  // Every rank looks before any shuts down: a rank whose coordinator's end
  // has closed lets its channel reader go.
  if (!troupe::test::allreduce_series(rank, size, "runtime.looked", 1)) {
    std::printf("rank %d: FAIL the allreduce after the look failed\n", rank);
    return 1;
  }
  const auto& process = threads[0].cpus;
  std::string seen;
  int readers = 0, elsewhere = 0, backends = 0, backends_on_cpu = 0;
  for (const auto& [tid, name, cores, switches] : threads) {
    seen += (seen.empty() ? "" : " ") + name + "=" + cores;
    if (name == "troupe.channel") {
      ++readers;
      elsewhere += cores != cpu;
    } else if (name == "troupe.backend") {
      // It waits on the rank's CPU between works (it runs large ones on
      // the process's).
      ++backends;
      backends_on_cpu += cores == cpu;
      elsewhere += cores != cpu && cores != process;
    }
  }
  const bool ok =
    process != cpu && readers > 0 && backends == 1 && backends_on_cpu == 1 && elsewhere == 0;
  std::printf("rank %d: %s runtime threads on CPU %s, the process on %s (%s)\n", rank,
              ok ? "PASS" : "FAIL", cpu, process.c_str(), seen.c_str());
  return ok ? 0 : 1;
}

int timeline_dynamic(int rank, int size, const std::string& file) {
  if (!std::getenv("TROUPE_TIMELINE")) {
    auto s = troupe::start_timeline(file);
    const bool refused = s.code() == troupe::status_code::invalid_argument &&
                         s.message().find("TROUPE_TIMELINE=DYNAMIC") != std::string::npos;
    std::printf("rank %d: %s start_timeline without TROUPE_TIMELINE: %s\n", rank,
                refused ? "PASS" : "FAIL", s.message().c_str());
    return refused ? 0 : 1;
  }
  if (!troupe::test::allreduce_series(rank, size, "before", 5))
    return 1;
  if (auto s = troupe::start_timeline(file, true); !s.ok()) {
    std::printf("rank %d: FAIL start_timeline: %s\n", rank, s.message().c_str());
    return 1;
  }
  std::vector<float> values(4, static_cast<float>(rank));
  std::vector<troupe::tensor> ts;
  for (auto& v : values)
    ts.push_back({&v, data_type::float32, {1}});
  bool ok = true;
  for (auto& h : troupe::grouped_allreduce(ts, ts, "during.fused"))
    ok = h.wait().ok() && ok;
  float row = static_cast<float>(rank);
  ok = troupe::allgather({&row, data_type::float32, {1}}, "during.gather").wait().ok() && ok;
  ok = troupe::stop_timeline().ok() && ok;
  ok = troupe::test::allreduce_series(rank, size, "after", 5) && ok;
  std::printf("rank %d: %s dynamic timeline\n", rank, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ops";
  auto s = mode == "process-sets"    ? troupe::init({{0, 2}, {1, 3}})
           : mode == "autotune-sets" ? troupe::init({{0, 1}, {1, 2}})
                                     : troupe::init();
  if (!s.ok()) {
    std::fprintf(stderr, "init failed: %s\n", s.message().c_str());
    return 1;
  }
  const int rank = troupe::rank();
  const int size = troupe::size();
  int rc = 2;
  if (mode == "ops") {
    std::vector<std::string> passed;
    rc = troupe::test::run_checks(troupe::test::op_matrix(rank, size), rank, "collectives",
                                  &passed);
    // ops MATRIX_FILE: rank 0 writes what passed as docs' support matrix.
    if (argc > 2 && rank == 0) {
      const char* backend = std::getenv("TROUPE_CPU_OPERATIONS");
      std::ofstream(argv[2]) << troupe::test::support_matrix(passed, backend ? backend : "gloo",
                                                             size);
    }
  }
  else if (mode == "shm-ops" && (argc == 3 || argc == 4)) {
    rc = troupe::test::run_checks(troupe::test::op_matrix(rank, size), rank, "collectives");
    rc = troupe::test::run_shm_size_checks(rank, size) != 0 ? 1 : rc;
    const bool want = std::atoi(argv[2]) != 0;
    const auto segment = troupe::test::mapped_shm_segment("data-");
    std::printf("rank %d: %s shared-memory segment %s\n", rank,
                want != segment.empty() ? "PASS" : "FAIL",
                segment.empty() ? "not mapped" : segment.c_str());
    if (want == segment.empty())
      rc = 1;
    if (argc == 4) {
      const bool want_channel = std::atoi(argv[3]) != 0;
      const bool channel = !troupe::test::mapped_shm_segment("ctl-").empty();
      std::printf("rank %d: %s control channel segment %s\n", rank,
                  want_channel == channel ? "PASS" : "FAIL", channel ? "mapped" : "not mapped");
      if (want_channel != channel)
        rc = 1;
    }
  }
  else if (mode == "shm-kill" && (argc == 4 || (argc == 5 && argv[4] == std::string("fds-held"))))
    rc = troupe::test::run_shm_kill(rank, size, std::atoi(argv[2]), argv[3], argc == 5);
  else if (mode == "shm-orphans")
    troupe::test::run_shm_orphans(rank);
  else if (mode == "many")
    rc = troupe::test::run_checks(
      troupe::test::many_small(rank, size, argc > 2 ? std::atoi(argv[2]) : 1000), rank,
      "small allreduces in flight");
  else if ((mode == "fast-lane" || mode == "fast-lane-lru") && (argc == 3 || argc == 4)) {
    // With a stop file: holds after the steps (metrics scraped meanwhile).
    rc = mode == "fast-lane"
           ? troupe::test::run_fast_lane_checks(rank, size, std::atoi(argv[2]))
           : troupe::test::run_fast_lane_lru_checks(rank, size, std::atoi(argv[2]));
    if (rc == 0 && argc == 4) {
      std::printf("rank %d: PASS fast lane, holding\n", rank);
      rc = await_file(rank, argv[3]) ? 0 : 1;
    }
  }
  else if (mode == "cache" || mode == "tune")
    rc = troupe::test::run_cache_checks(rank, size, argc > 2 ? std::atoi(argv[2]) : 1000,
                                        mode == "tune");
  else if (mode == "reset" && argc == 3)
    rc = troupe::test::run_reset_checks(rank, size, std::atoi(argv[2]));
  else if (mode == "reset-after-loss" && argc == 3)
    rc = troupe::test::run_reset_after_loss(rank, size, std::atoi(argv[2]));
  else if (mode == "late-set" && argc == 3)
    rc = troupe::test::run_late_set_check(rank, size, std::atof(argv[2]));
  else if (mode == "affinity" && argc == 3)
    rc = affinity(rank, size, argv[2]);
  else if (mode == "runtime-cpu")
    rc = runtime_cpu(rank, size);
  else if (mode == "idle-wakeups")
    rc = troupe::test::run_idle_wakeup_check(rank, size);
  else if (mode == "timeline-dynamic" && argc == 3)
    rc = timeline_dynamic(rank, size, argv[2]);
  else if (mode == "serialized-mpi" && size == 3)
    rc = troupe::test::run_serialized_mpi_check(rank);
  else if (mode == "process-sets")
    rc = troupe::test::run_process_set_checks(rank, size);
  else if (mode == "crossing-sets" && size >= 5)
    rc = crossing_sets(rank, size);
  else if (mode == "autotune-sets" && argc == 3)
    rc = troupe::test::run_autotune_set_checks(rank, size, std::atoi(argv[2]));
  else if (mode == "allocate")
    rc = troupe::test::run_checks(troupe::test::allocator_checks(rank, size), rank,
                                  "collectives into allocated outputs");
  else if (mode == "errors")
    rc = troupe::test::run_error_checks(rank, size);
  else if (mode == "join")
    rc = troupe::test::run_join_checks(rank, size);
  else if (mode == "stall")
    rc = troupe::test::run_stall_checks(rank, size);
  else if (mode == "failed-allocator")
    rc = troupe::test::run_failed_allocator_check(rank, size);
  else if (mode == "hold" && argc == 4)
    rc = hold(rank, size, std::atoi(argv[2]), argv[3]);
  else if (mode == "attacked" && argc == 4) {
    // As hold, then more allreduces: the job still works after whatever
    // reached its ports while it held.
    rc = hold(rank, size, std::atoi(argv[2]), argv[3]);
    const bool after = rc == 0 && troupe::test::allreduce_series(rank, size, "after-attack", 5);
    std::printf("rank %d: %s allreduces after the attack\n", rank, after ? "PASS" : "FAIL");
    rc = after ? 0 : 1;
  } else if (mode == "set-metrics" && argc == 4)
    rc = set_metrics(rank, std::atoi(argv[2]), argv[3]);
  else if (mode == "reinit") {
    troupe::shutdown();
    const auto s = troupe::init();
    rc = s.ok() ? 0 : 1;
    std::printf("rank %d: %s init() after shutdown(): %s\n", rank, s.ok() ? "PASS" : "FAIL",
                s.message().c_str());
  }
  else if (mode == "lose-peer" && argc == 5)
    rc = lose_peer(rank, argv[2], std::atoi(argv[3]), argv[4]);
  else
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
  std::fflush(stdout);
  troupe::shutdown();
  if (mode == "errors" && rc == 0)
    rc = troupe::test::check_after_shutdown(rank);
  return rc;
}
