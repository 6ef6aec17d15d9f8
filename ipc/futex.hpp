#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <sched.h>

// Waiting on a word of memory shared between processes (no
// FUTEX_PRIVATE_FLAG: the word lives in a shared segment).
namespace troupe::ipc {

/// Sleeps while `*word == expected`, at most `for_at_most`; may return
/// early (a wake-up, a signal): callers re-check their condition.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected,
                std::chrono::nanoseconds for_at_most);

/// Wakes every thread of any process sleeping on `word`.
void futex_wake_all(std::atomic<uint32_t>* word);

/// A pause for spin loops: lets the sibling hyperthread run.
void cpu_relax();

/// Looks at `ready()` until it returns true or `for_at_most` has passed:
/// on the CPU's pause for the first `pause`, then yielding the core between
/// looks, so a thread the late peer needs can have this core (a 2 ms spin
/// on pause alone put 1-2 % of 4-byte allreduces at 2.2 ms and more,
/// docs/benchmarks.md run (17)). A thread that shares its CPU with the
/// threads that make `ready()` true yields from the start (`pause` 0).
/// True once ready. For waits on a peer that has a core of its own: it is
/// usually a wake-up behind, and a thread asleep adds a futex round trip.
template <class Ready>
bool poll_for(Ready&& ready, std::chrono::microseconds for_at_most,
              std::chrono::microseconds pause = std::chrono::microseconds(20)) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto pause_end = start + std::min(for_at_most, pause);
  const auto end = start + for_at_most;
  bool yielding = pause_end <= start;
  for (unsigned i = 1;; ++i) {
    if (ready())
      return true;
    if (yielding || i % 64 == 0) {
      const auto now = clock::now();
      if (now >= end)
        return false;
      yielding = now >= pause_end;
    }
    if (yielding)
      sched_yield();
    else
      cpu_relax();
  }
}

} // namespace troupe::ipc
