#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "backends/gloo/gloo_communicator.hpp"

namespace troupe::backends {

class shm_group;

/// Gloo mode with the ranks of a host reducing through shared memory: an
/// allreduce is reduced among the set's ranks on each host in a shared
/// segment (shm_group), each rank's share with the ranks of the same local
/// index on the other hosts over a Gloo context of their own, and copied
/// out by every rank. Used when every host of the set has the same number
/// (two or more) of its ranks. A set on one host also broadcasts, gathers,
/// exchanges (alltoall), reduce-scatters and meets at barriers through the
/// segment. Otherwise, and for every
/// other collective, gloo_communicator runs it for the whole set (over its
/// TCP links, or Gloo's context).
class shm_communicator : public gloo_communicator {
public:
  explicit shm_communicator(backend_context ctx);
  /// Logs (info) what went through the segment and across hosts.
  ~shm_communicator() override;

  /// Gloo's full mesh, then the hosts of the members through the store,
  /// the segment (created by the host's first rank, named in the store),
  /// and the cross-host contexts. Logs (info) the layout, or why the set
  /// stays on Gloo.
  void connect() override;
  void allreduce(const allreduce_options& opts) override;
  /// Through the segment (the cross-host step on the library): on a host
  /// of two or more of the set's ranks.
  bool reduces_pieces() const override;
  void allreduce_pieces(piece_span pieces, data_type dtype, reduce_op op,
                        const element_finish& finish) override;
  /// Through the segment, cache-sized (four rounds per member): the fusion
  /// buffer's copies then stay in cache too, and the cross-host step makes
  /// the same calls. Without a segment, gloo_communicator's.
  size_t chunk_bytes() const override;
  /// Through the segment on one host (each rank reduces its own part),
  /// Gloo's where there is no segment.
  bool reduces_scatter(size_t count) const override;
  void reducescatter(const reducescatter_options& opts) override;
  /// Through the segment on one host; else Gloo's.
  void allgather(const allgather_options& opts) override;
  void broadcast(const broadcast_options& opts) override;
  void alltoall(const alltoall_options& opts) override;
  /// On one host the row counts, then the rows, through the segment (the
  /// links would take them over loopback TCP); else Gloo's.
  void alltoall_rows(const void* input, const std::vector<int64_t>& send_rows, size_t row_bytes,
                     const row_placement& place) override;
  void barrier() override;
  /// Fails the waits of this host's ranks in the segment and every Gloo
  /// context.
  void abort() override;

private:
  backend_context ctx_;
  std::mutex mutex_;  // guards group_, cross_ (set by connect()) and aborted_ for abort()
  std::unique_ptr<shm_group> group_;
  std::unique_ptr<gloo_communicator> cross_;  // none on a single host
  bool aborted_ = false;
  std::string segment_name_;  // for the log lines
  // Allreduces through the segment and the bytes involved; bytes of this
  // rank's shares sent through the cross-host step. The backend's thread only.
  uint64_t allreduces_ = 0;
  uint64_t bytes_ = 0;
  uint64_t cross_bytes_ = 0;
  // Broadcasts, allgathers, alltoalls, reduce-scatters and barriers through the segment, and the
  // bytes they moved. The backend's thread only.
  uint64_t others_ = 0;
  uint64_t other_bytes_ = 0;
  uint64_t alltoalls_ = 0;  // of others_
  // Whether the set's ranks are all on this host (a member's set rank is
  // then its index in the group). Set by connect().
  bool one_host_ = false;
};

} // namespace troupe::backends
