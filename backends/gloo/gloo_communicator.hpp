#pragma once

#include <memory>
#include <mutex>

#include "backends/communicator.hpp"

namespace gloo {
class Context;
}

namespace troupe::backends {

/// CPU collectives over Gloo's TCP transport, full mesh built through the
/// launcher's store.
class gloo_communicator : public communicator {
public:
  explicit gloo_communicator(backend_context ctx);
  ~gloo_communicator() override;

  const char* name() const override {
    return "gloo";
  }
  void connect() override;
  void allreduce(const allreduce_options& opts) override;
  void allgather(const allgather_options& opts) override;
  void broadcast(const broadcast_options& opts) override;
  void alltoall(const alltoall_options& opts) override;
  void barrier() override;
  void sendrecv(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                int peer) override;
  /// Fails every pair of the context (Gloo's own path for its timeout):
  /// their pending sends and receives throw, and Gloo's thread no longer
  /// touches their buffers. (Closing a pair alone wakes no waiter.)
  void abort() override;

private:
  // Runs a Gloo call; when it throws, first fails every pair, so that no
  // other pair may still write the caller's buffer once the error is seen.
  template <class F>
  void guarded(const char* what, F&& f);

  backend_context ctx_;
  std::mutex mutex_;  // guards gloo_ (written by connect()) and aborted_ for abort()
  std::shared_ptr<gloo::Context> gloo_;
  bool aborted_ = false;
};

} // namespace troupe::backends
