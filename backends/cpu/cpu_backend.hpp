#pragma once

#include <memory>
#include <optional>

#include "backends/communicator.hpp"
#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {

/// Collectives on host memory over a CPU communicator (Gloo, MPI, or none
/// for a set of one): the copies into and out of the fusion buffer, 16-bit
/// float widening and scaling run on the backend's thread, between the
/// communicator's blocking calls. A work has finished when start() returns.
class cpu_backend : public backend {
public:
  /// `fusion_chunk_bytes`: see run_context; none: the communicator's
  /// choice once connected.
  cpu_backend(std::unique_ptr<communicator> comm, int set_rank, int set_size,
              std::optional<size_t> fusion_chunk_bytes);

  const char* name() const override {
    return comm_->name();
  }
  void connect() override;
  std::unique_ptr<completion> start(actors::collective_work& work) override;
  bool waits_end(const actors::collective_work& work) const override {
    return comm_->waits_end(work.response);
  }
  /// Interrupts the communicator call start() is blocked in, if any: start()
  /// then returns a failed completion (nothing is running once it has).
  void abort() override {
    comm_->abort();
  }

private:
  std::unique_ptr<communicator> comm_;
  int rank_;
  int size_;
  std::optional<size_t> fusion_chunk_bytes_;
  scratch_buffers scratch_;
};

} // namespace troupe::backends
