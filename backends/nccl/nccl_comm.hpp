#pragma once

// One NCCL communicator (include only from the NCCL backend's .cpp files).

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include <nccl.h>

namespace troupe::backends {

/// An NCCL communicator in non-blocking mode, so that no call holds the
/// backend's thread: creation and every group call are waited for by
/// polling, with a deadline, and abort() from another thread takes effect
/// between two polls. Created on the current CUDA device.
class nccl_comm {
public:
  /// Joins the communicator `id` names as `rank` of `size`. Throws
  /// backend_error when NCCL fails, the members do not all join within
  /// `timeout`, or `stop` turns true meanwhile (the backend's abort, which
  /// cannot reach a communicator still being created).
  nccl_comm(const ncclUniqueId& id, int rank, int size, std::chrono::milliseconds timeout,
            const std::atomic<bool>& stop);
  /// Aborts (never waits for peers, which may be gone).
  ~nccl_comm();
  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;

  /// Runs `enqueue(comm)` (NCCL calls, usually a group) and waits until
  /// NCCL has taken them; the GPU runs them later. Throws backend_error.
  template <class F>
  void run(const char* what, F&& enqueue) {
    std::unique_lock lock(mutex_);
    if (comm_ == nullptr)
      throw_aborted(what);
    settle(lock, what, enqueue(comm_));
  }

  /// The communicator's asynchronous error (a peer failed, a network
  /// error), aborting it when there is one; "" while it is healthy.
  std::string async_error();

  /// Aborts the communicator: kernels of its collectives stop, so the
  /// events after them complete. Thread-safe, idempotent.
  void abort();

private:
  [[noreturn]] void throw_aborted(const char* what) const;
  // Waits while NCCL reports `result` = ncclInProgress for the last call.
  void settle(std::unique_lock<std::mutex>& lock, const char* what, ncclResult_t result);

  std::mutex mutex_;  // NCCL calls (the backend's thread) against abort()
  ncclComm_t comm_ = nullptr;
  std::string aborted_because_;
  std::chrono::milliseconds timeout_;
  const std::atomic<bool>& stop_;
};

/// Throws backend_error "nccl <what>: <NCCL's text>" unless success.
void check_nccl(ncclResult_t result, const char* what);

} // namespace troupe::backends
