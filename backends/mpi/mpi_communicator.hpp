#pragma once

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/communicator.hpp"

namespace troupe::backends {

class shm_group;

/// CPU collectives over MPI (Open MPI), on a duplicate of MPI_COMM_WORLD or
/// a communicator of a process set's ranks.
/// Reductions run in place (MPI_IN_PLACE) on the caller's or the fusion
/// buffer: no scratch buffer per call. Where every host of the set has the
/// same number (two or more) of its ranks and `shared_memory` is on, an
/// allreduce is reduced among each host's ranks in a shared segment
/// (shm_group, faster than Open MPI's shared-memory transport here), each
/// rank's share with the same local rank of the other hosts over MPI.
class mpi_communicator : public communicator {
public:
  /// The communicator of `ctx.world_ranks` (empty = MPI_COMM_WORLD),
  /// created at connect() with `ctx.communicator_tag` (unique among sets
  /// created concurrently); sendrecv() moves at most
  /// `ctx.mpi_sendrecv_chunk_bytes` per MPI call (as Horovod's
  /// HOROVOD_ADASUM_MPI_CHUNK_SIZE), so an exchange may exceed MPI's int
  /// counts. Waits in the shared segment end after `ctx.timeout`.
  /// MPI-3's counts and displacements are ints: no MPI call is given more
  /// than `count_limit` elements (bytes where it moves bytes), nor a
  /// displacement past it, and a larger collective goes in pieces of at
  /// most that (smaller in tests, to cross it with small tensors).
  explicit mpi_communicator(const backend_context& ctx,
                            int64_t count_limit = std::numeric_limits<int>::max());
  /// Logs (info) what went through the segment.
  ~mpi_communicator() override;

  const char* name() const override {
    return "mpi";
  }
  /// The set's communicator, then the shared segment of this host's ranks
  /// (created by the first, named to the others over MPI) and the
  /// communicator across hosts. Logs (info) the layout, or why allreduces
  /// stay on MPI.
  void connect() override;
  /// Cache-sized: larger calls also take Open MPI's slower large-message
  /// path here.
  size_t chunk_bytes() const override {
    return cache_sized_chunk_bytes;
  }
  void allreduce(const allreduce_options& opts) override;
  /// Through the segment (the cross-host step on the library): on a host
  /// of two or more of the set's ranks.
  bool reduces_pieces() const override;
  /// MPI's own calls wait for ever (abort() cannot end them): only a
  /// plain allreduce of a set the host's segment holds whole.
  bool waits_end(const v1::Response& resp) const override;
  void allreduce_pieces(piece_span pieces, data_type dtype, reduce_op op,
                        const element_finish& finish) override;
  /// Through the segment on one host (each rank reduces its own part), else
  /// MPI_Reduce_scatter where the whole vector fits in one call (Open MPI
  /// adds the counts up in an int), else each rank's part reduced to it
  /// (MPI_Reduce) in pieces.
  bool reduces_scatter(size_t) const override {
    return true;
  }
  void reducescatter(const reducescatter_options& opts) override;
  void allgather(const allgather_options& opts) override;
  void broadcast(const broadcast_options& opts) override;
  /// MPI_Alltoallv where every rank's counts and displacements fit in one
  /// call, else pairwise exchanges in pieces; the set first agrees which
  /// (an MPI_Allreduce), as no rank knows what the others receive.
  void alltoall(const alltoall_options& opts) override;
  /// As alltoall(), each sender telling every member with its row counts
  /// whether it sends each at most 1/size of the limit: where all do, every
  /// rank knows one call will do without agreeing on it.
  void alltoall_rows(const void* input, const std::vector<int64_t>& send_rows, size_t row_bytes,
                     const row_placement& place) override;
  void barrier() override;
  void sendrecv(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                int peer) override;
  /// Called when a peer is lost: no MPI call starts from then on (each
  /// fails), and the waits of this host's ranks in the segment fail. MPI offers no way to interrupt a blocked call short of
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
  // The shared segment of this host's ranks and the communicator across
  // hosts, where the set's layout allows it.
  void join_host_group();
  // Whether the segment holds every rank of the set (one host).
  bool segment_holds_the_set() const;
  // MPI_Allreduce in place, in pieces of at most count_limit_ elements, on
  // the set's communicator or across hosts.
  void allreduce_in_pieces(void* data, size_t count, data_type dtype, reduce_op op,
                           bool across_hosts);
  // Sends `send_bytes` to `to` while receiving `recv_bytes` from `from`, one
  // piece of at most `piece` bytes each way at a time (`to` receives as many
  // as it is sent).
  void exchange(const char* send, size_t send_bytes, int to, char* recv, size_t recv_bytes,
                int from, size_t piece, const char* what);
  // Each of size_ steps s sends to rank_ + s what `send(to)` says and
  // receives from rank_ - s into `recv(from)`, in pieces of count_limit_.
  template <class Send, class Recv>
  void pairwise(Send&& send, Recv&& recv, const char* what);
  // alltoall() once the set agreed whether every count and displacement
  // fits in one MPI_Alltoallv.
  void alltoall_agreed(const alltoall_options& opts, bool in_one_call);

  // Holds the MPI_Comm, so mpi.h stays out of this header.
  struct comm_handle;
  std::unique_ptr<comm_handle> comm_;
  std::vector<int> world_ranks_;
  int tag_;
  int64_t sendrecv_chunk_bytes_;
  int64_t count_limit_;
  bool shared_memory_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0;  // in the set's communicator
  int size_ = 1;
  std::mutex mutex_;  // guards group_ (set by connect()) for abort()
  std::unique_ptr<shm_group> group_;
  std::string segment_name_;  // for the log lines
  // Allreduces through the segment and their bytes. The backend's thread only.
  uint64_t group_allreduces_ = 0;
  uint64_t group_bytes_ = 0;
  std::atomic<uint64_t> calls_{0};  // odd while inside a blocking call
  std::atomic<const char*> in_call_{""};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> watching_{false};  // an abort() waits for the running call
};

} // namespace troupe::backends
