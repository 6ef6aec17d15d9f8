#pragma once

#include "backends/communicator.hpp"

namespace troupe::backends {

/// A process set of one rank: every collective is the identity, so nothing
/// is sent anywhere. Lets a script run without a launcher, as Horovod does.
class local_communicator : public communicator {
public:
  const char* name() const override {
    return "local";
  }
  void connect() override {
  }
  void allreduce(const allreduce_options&) override {
  }
  void allgather(const allgather_options& opts) override;
  void broadcast(const broadcast_options&) override {
  }
  void alltoall(const alltoall_options& opts) override;
  void barrier() override {
  }
  void sendrecv(const void*, size_t, void*, size_t, int peer) override;
  /// Nothing ever waits for a peer.
  void abort() override {
  }
};

} // namespace troupe::backends
