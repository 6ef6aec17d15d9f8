#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "backends/backend.hpp"
#include "backends/host_layout.hpp"

namespace troupe::backends {

/// Collectives on CUDA tensors over NCCL for one process set: per CUDA
/// device of this rank, one communicator (created by the first work on that
/// device; its unique id goes through the launcher's store under the set's
/// prefix), one stream of its own that waits for each tensor's producer
/// (never for the whole device), and a fusion buffer. start() only enqueues
/// work on the GPU; its completion is an event, polled.
class nccl_backend : public backend {
public:
  explicit nccl_backend(backend_context ctx);
  ~nccl_backend() override;

  const char* name() const override {
    return "nccl";
  }
  /// Nothing to do here: a communicator is made by the first work on each
  /// device, when every member runs that work.
  void connect() override {
  }
  std::unique_ptr<completion> start(actors::collective_work& work) override;
  /// Aborts every communicator (ncclCommAbort): the GPU stops their
  /// collectives, the running works finish with an error.
  void abort() override;

  struct device;

private:
  device& device_for(int ordinal);
  /// The set's hosts when a hierarchical collective is asked for and they
  /// have two levels (the first call exchanges them); null: flat.
  const host_layout* two_levels();

  backend_context ctx_;
  std::optional<host_layout> layout_;
  std::atomic<bool> aborted_{false};
  std::mutex devices_mutex_;  // devices_ against abort()
  std::map<int, std::unique_ptr<device>> devices_;
  int communicators_made_ = 0;  // numbers the unique ids in the store
};

} // namespace troupe::backends
