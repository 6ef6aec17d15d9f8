#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

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

} // namespace troupe::ipc
