#include "idle_checks.hpp"

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "checks.hpp"
#include "thread_status.hpp"

namespace troupe::test {

namespace {

// Context switches so far (each wake-up from a sleep ends in one) and
// name, by thread id.
std::map<std::string, thread_status> by_tid() {
  std::map<std::string, thread_status> out;
  for (auto& t : thread_statuses())
    out[t.tid] = std::move(t);
  return out;
}

// The runtime's threads whose idle wake-ups are counted: all of them. (A
// Gloo TCP device's loop thread, which would inherit the backend's name,
// wakes every 10 ms by Gloo's design; only sets of more than 8 make one.)
bool counted(const std::string& name) {
  return name.rfind("caf.", 0) == 0 || name == "troupe.channel" || name == "troupe.backend";
}

} // namespace

int run_idle_wakeup_check(int rank, int size) {
  if (!allreduce_series(rank, size, "idle", 5)) {
    std::printf("rank %d: FAIL allreduce before the idle window\n", rank);
    return 1;
  }
  // What the last collective set going (a reader's poll for a reply, the
  // scheduler's fast polls) ends well within this.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  constexpr int window_seconds = 3;
  const auto before = by_tid();
  std::this_thread::sleep_for(std::chrono::seconds(window_seconds));
  const auto after = by_tid();
  // Heartbeats (one a second per connection), the clock's timers and one
  // backstop wake-up a second per reader come to about 10 a second on 2
  // ranks; a thread that polls or wakes on a 10 ms timer adds 100.
  constexpr double limit_per_second = 40;
  long total = 0;
  std::string seen;
  for (const auto& [tid, t] : after) {
    const auto was = before.find(tid);
    if (!counted(t.name) || was == before.end())
      continue;
    const long woke = t.switches - was->second.switches;
    total += woke;
    seen += (seen.empty() ? "" : ", ") + t.name + " " + std::to_string(woke);
  }
  const double rate = static_cast<double>(total) / window_seconds;
  const bool ok = rate < limit_per_second;
  std::printf("rank %d: %s idle runtime threads woke %.1f times a second (limit %.0f; over %d "
              "s: %s)\n",
              rank, ok ? "PASS" : "FAIL", rate, limit_per_second, window_seconds, seen.c_str());
  return ok ? 0 : 1;
}

} // namespace troupe::test
