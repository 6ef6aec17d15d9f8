#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "troupe/status.hpp"
#include "troupe/types.hpp"

namespace troupe {

namespace detail {

/// Completion state shared by the caller's handle and the runtime. The first
/// completion wins; later ones (a late backend result after an abort) are
/// ignored. In a child fork()ed after init(), a state still pending at the
/// fork reads as failed with the fork's error: the runtime's threads, which
/// alone complete it, stay in the parent.
class handle_state {
public:
  /// Allgather, alltoall and reducescatter results live here (their size is
  /// known only after negotiation) unless the caller gave an
  /// output_allocator. Written by the runtime before complete().
  std::vector<char> output;
  shape_t output_shape;
  /// Alltoall: rows received from each rank.
  std::vector<int64_t> received_splits;

  bool complete(status result) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (done_.load(std::memory_order_relaxed))
        return false;
      result_ = std::move(result);
      done_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    return true;
  }

  // Without the lock: the runtime asks this of every pending collective as
  // it negotiates, hundreds per training step.
  bool done() const {
    return done_.load(std::memory_order_acquire);
  }

  /// done(), or pending at a fork(): either way result() is final.
  bool settled() const {
    return done() || made_before_fork();
  }

  bool wait_for(std::chrono::nanoseconds timeout) const {
    spin();
    if (settled())
      return true;
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, timeout, [this] { return done(); });
  }

  void wait() const {
    spin();
    if (settled())
      return;
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait(guard, [this] { return done(); });
  }

  // Without the lock, which a parent's runtime thread may have held at the
  // fork: result_ is written once, before done_.
  status result() const {
    if (done())
      return result_;
    if (made_before_fork())
      return fork_error_();
    return {};
  }

  /// How long wait() and wait_for() yield before they sleep (the runtime
  /// sets it per membership epoch; see workers/wait_spin.hpp).
  static void set_spin(std::chrono::microseconds spin) {
    spin_us_.store(spin.count(), std::memory_order_relaxed);
  }

  /// Called in a child fork()ed after init() (api/process_runtime.cpp):
  /// every state made until now belongs to the parent's runtime, and fails
  /// here with `error()` (status_code::shut_down naming both pids). A
  /// pointer, not a call into the API's library, which the runtime's own
  /// layers do not link.
  static void note_fork(status (*error)()) {
    fork_error_ = error;
    forks_.fetch_add(1, std::memory_order_relaxed);
  }

private:
  inline static std::atomic<int64_t> spin_us_{0};
  // Forks after init() in this process's ancestry: one load per state made
  // and none per wait that completes, instead of a getpid() per handle.
  // Only the forking thread, alone in the child, writes them; the threads
  // that read them start after.
  inline static std::atomic<uint32_t> forks_{0};
  inline static status (*fork_error_)() = nullptr;

  // Made before a fork() after init(): if not done, nothing here completes it.
  bool made_before_fork() const {
    return forks_at_creation_ != forks_.load(std::memory_order_relaxed);
  }

  // With a core to spare, a small collective often completes sooner than
  // a sleeping thread can be woken: yield for a moment before blocking.
  // Without one the yielding caller takes the core its own collective
  // needs. Long waits still sleep (no busy polling while the ranks compute).
  void spin() const {
    const std::chrono::microseconds spin{spin_us_.load(std::memory_order_relaxed)};
    if (spin.count() == 0)
      return;
    const auto spin_until = std::chrono::steady_clock::now() + spin;
    while (!settled() && std::chrono::steady_clock::now() < spin_until)
      std::this_thread::yield();
  }

  mutable std::mutex mtx_;
  mutable std::condition_variable cv_;
  std::atomic<bool> done_{false};  // written under mtx_, after result_
  status result_;
  const uint32_t forks_at_creation_ = forks_.load(std::memory_order_relaxed);
};

} // namespace detail

/// The caller's side of one asynchronous collective.
class handle {
public:
  handle() = default;
  explicit handle(std::shared_ptr<detail::handle_state> state)
    : state_(std::move(state)) {
  }

  bool valid() const {
    return state_ != nullptr;
  }

  /// True once the collective finished (successfully or not), or, in a
  /// child fork()ed after init(), was pending at the fork (it fails there,
  /// see wait()). Never blocks.
  bool poll() const {
    return state_->settled();
  }

  /// Blocks until completion and returns the outcome. A lost or frozen peer
  /// fails it (heartbeats, backend timeouts; under MPI, whose calls cannot
  /// be interrupted, a collective blocked with it ends the job with
  /// MPI_Abort instead), but a collective that a live
  /// member never submits waits for that member, until the stall shutdown
  /// time (TROUPE_STALL_SHUTDOWN_TIME_SECONDS, off by default) fails it:
  /// use wait_for() to bound the wait. In a child fork()ed after init(), a
  /// collective pending at the fork fails at once with
  /// status_code::shut_down naming both pids: its result reaches only the
  /// runtime's pid. One that had completed keeps its result.
  status wait() const {
    state_->wait();
    return state_->result();
  }

  /// Blocks at most `timeout`; returns status_code::timeout if still running
  /// (the collective itself goes on).
  template <class Rep, class Period>
  status wait_for(std::chrono::duration<Rep, Period> timeout) const {
    if (!state_->wait_for(timeout))
      return {status_code::timeout, "collective still in progress"};
    return state_->result();
  }

  /// Outcome so far: ok while running (the fork's error, as wait(), in a
  /// child fork()ed after init()).
  status result() const {
    return state_->result();
  }

  /// Allgather, alltoall, reducescatter: the result's bytes and shape, valid
  /// after a successful wait. With an output_allocator the bytes are in its
  /// memory and output() is empty.
  const std::vector<char>& output() const {
    return state_->output;
  }
  const shape_t& output_shape() const {
    return state_->output_shape;
  }
  /// Alltoall: rows received from each rank.
  const std::vector<int64_t>& received_splits() const {
    return state_->received_splits;
  }

private:
  std::shared_ptr<detail::handle_state> state_;
};

} // namespace troupe
