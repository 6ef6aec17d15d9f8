#include "backends/nccl/nccl_comm.hpp"

#include <thread>

#include "backends/backend.hpp"

namespace troupe::backends {

namespace {

using clock = std::chrono::steady_clock;

// Polls of a pending NCCL call: quick first looks (a group enqueue takes
// microseconds), at most every millisecond after.
constexpr std::chrono::microseconds first_poll{10};
constexpr std::chrono::microseconds slowest_poll{1000};

std::string text(ncclResult_t result, ncclComm_t comm) {
  std::string t = ncclGetErrorString(result);
  if (comm != nullptr)
    if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0')
      t += std::string(" (") + last + ")";
  return t;
}

} // namespace

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess && result != ncclInProgress)
    throw backend_error(std::string("nccl ") + what + ": " + text(result, nullptr));
}

nccl_comm::nccl_comm(const ncclUniqueId& id, int rank, int size,
                     std::chrono::milliseconds timeout, const std::atomic<bool>& stop)
  : timeout_(timeout), stop_(stop) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  std::unique_lock lock(mutex_);
  const auto result = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    comm_ = nullptr;
    check_nccl(result, "ncclCommInitRankConfig");
  }
  settle(lock, "ncclCommInitRankConfig (every member joins)", result);
}

nccl_comm::~nccl_comm() {
  abort();
}

void nccl_comm::throw_aborted(const char* what) const {
  throw backend_error(std::string("nccl ") + what + ": the communicator was aborted (" +
                      aborted_because_ + ")");
}

void nccl_comm::settle(std::unique_lock<std::mutex>& lock, const char* what,
                       ncclResult_t result) {
  const auto deadline = clock::now() + timeout_;
  auto delay = first_poll;
  while (result == ncclInProgress) {
    lock.unlock();
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, slowest_poll);
    lock.lock();
    if (comm_ == nullptr)
      throw_aborted(what);
    const bool late = clock::now() > deadline;
    if (late || stop_) {
      aborted_because_ = late ? std::string(what) + " did not finish within " +
                                  std::to_string(timeout_.count()) + " ms"
                              : "the backend was aborted during " + std::string(what);
      ncclCommAbort(comm_);
      comm_ = nullptr;
      throw_aborted(what);
    }
    check_nccl(ncclCommGetAsyncError(comm_, &result), "ncclCommGetAsyncError");
  }
  if (result != ncclSuccess) {
    const auto why = text(result, comm_);
    aborted_because_ = std::string(what) + " failed: " + why;
    ncclCommAbort(comm_);
    comm_ = nullptr;
    throw backend_error(std::string("nccl ") + what + ": " + why);
  }
}

std::string nccl_comm::async_error() {
  std::lock_guard lock(mutex_);
  if (comm_ == nullptr)
    return aborted_because_;
  ncclResult_t state = ncclSuccess;
  const auto queried = ncclCommGetAsyncError(comm_, &state);
  if (queried != ncclSuccess)
    state = queried;
  if (state == ncclSuccess || state == ncclInProgress)
    return {};
  aborted_because_ = "asynchronous error: " + text(state, comm_);
  ncclCommAbort(comm_);
  comm_ = nullptr;
  return aborted_because_;
}

void nccl_comm::abort() {
  std::lock_guard lock(mutex_);
  if (comm_ == nullptr)
    return;
  if (aborted_because_.empty())
    aborted_because_ = "a member of the process set was lost or the set was reset";
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

} // namespace troupe::backends
