#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "backends/communicator.hpp"

namespace troupe::backends {

/// CPU collectives over MPI (Open MPI), on a duplicate of MPI_COMM_WORLD or
/// a communicator of a process set's ranks.
/// Reductions run in place (MPI_IN_PLACE) on the caller's or the fusion
/// buffer: no scratch buffer per call.
class mpi_communicator : public communicator {
public:
  /// The communicator of `world_ranks` (empty = MPI_COMM_WORLD), created
  /// at connect() with `tag` (unique among sets created concurrently);
  /// sendrecv() moves at most `sendrecv_chunk_bytes` per MPI call (as
  /// Horovod's HOROVOD_ADASUM_MPI_CHUNK_SIZE), so an exchange may exceed
  /// MPI's int counts.
  mpi_communicator(std::vector<int> world_ranks, int tag, int64_t sendrecv_chunk_bytes);
  ~mpi_communicator() override;

  const char* name() const override {
    return "mpi";
  }
  void connect() override;
  /// Cache-sized: larger calls also take Open MPI's slower large-message
  /// path here.
  size_t chunk_bytes() const override {
    return cache_sized_chunk_bytes;
  }
  void allreduce(const allreduce_options& opts) override;
  void allgather(const allgather_options& opts) override;
  void broadcast(const broadcast_options& opts) override;
  void alltoall(const alltoall_options& opts) override;
  void barrier() override;
  void sendrecv(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                int peer) override;
  /// Called when a peer is lost: no MPI call starts from then on (each
  /// fails). MPI offers no way to interrupt a blocked call short of
  /// MPI_Abort, and a call waiting for a frozen peer never returns: one
  /// still running `abort_grace` later ends the job with MPI_Abort, saying
  /// why, instead of hanging it for ever. Returns as soon as no call runs
  /// (a call that can still complete is left to).
  void abort() override;
  static constexpr std::chrono::seconds abort_grace{5};

private:
  // Runs one blocking MPI call, counted so that abort() can tell whether
  // one still runs; refused once aborted.
  template <class Call>
  void blocking(const char* what, Call&& call);

  // Holds the MPI_Comm, so mpi.h stays out of this header.
  struct comm_handle;
  std::unique_ptr<comm_handle> comm_;
  std::vector<int> world_ranks_;
  int tag_;
  int64_t sendrecv_chunk_bytes_;
  std::atomic<uint64_t> calls_{0};  // odd while inside a blocking call
  std::atomic<const char*> in_call_{""};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> watching_{false};  // an abort() waits for the running call
};

} // namespace troupe::backends
