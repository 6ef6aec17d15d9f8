#pragma once

#include <memory>

#include "backends/backend.hpp"

namespace troupe::backends {

/// CPU collectives over MPI (Open MPI), on a duplicate of MPI_COMM_WORLD.
/// Reductions run in place (MPI_IN_PLACE) on the caller's or the fusion
/// buffer: no scratch buffer per call.
class mpi_backend : public backend {
public:
  mpi_backend();
  ~mpi_backend() override;

  const char* name() const override {
    return "mpi";
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
  // Holds the MPI_Comm, so mpi.h stays out of this header.
  struct communicator;
  std::unique_ptr<communicator> comm_;
};

} // namespace troupe::backends
