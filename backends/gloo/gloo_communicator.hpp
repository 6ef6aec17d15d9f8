#pragma once

#include <memory>

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

private:
  backend_context ctx_;
  std::shared_ptr<gloo::Context> gloo_;
};

} // namespace troupe::backends
