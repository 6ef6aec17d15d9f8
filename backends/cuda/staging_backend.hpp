#pragma once

#include <map>
#include <memory>

#include "backends/backend.hpp"

namespace troupe::backends {

/// CUDA tensors through a CPU backend (no NCCL in this build, or
/// TROUPE_GPU_OPERATIONS=gloo|mpi): a work's CUDA tensors are copied into
/// pinned host memory (on a stream of their device that first waits for
/// their producer), the CPU backend runs on the host copies, and the
/// results are copied back to the caller's device memory before the work
/// finishes. Works of CPU tensors go straight to the CPU backend.
class staging_backend : public backend {
public:
  explicit staging_backend(std::unique_ptr<backend> cpu);
  ~staging_backend() override;

  const char* name() const override {
    return cpu_->name();
  }
  void connect() override {
    cpu_->connect();
  }
  std::unique_ptr<completion> start(actors::collective_work& work) override;
  /// A CPU work's are the CPU backend's; a CUDA work's copies are not to be
  /// run from another thread than the backend's.
  bool waits_end(const actors::collective_work& work) const override {
    return static_cast<device_kind>(work.response.device_kind()) == device_kind::cpu &&
           cpu_->waits_end(work);
  }
  void abort() override {
    cpu_->abort();
  }

  struct device;

private:
  device& device_for(int ordinal);

  std::unique_ptr<backend> cpu_;
  std::map<int, std::unique_ptr<device>> devices_;
};

} // namespace troupe::backends
