#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/buffer_piece.hpp"
#include "backends/element_finish.hpp"
#include "troupe/types.hpp"

namespace troupe::backends {

struct allreduce_options {
  void* data = nullptr;  // reduced in place
  size_t count = 0;      // elements
  data_type dtype = data_type::float32;
  reduce_op op = reduce_op::sum;
};

struct allgather_options {
  const void* input = nullptr;
  void* output = nullptr;
  std::vector<size_t> counts;  // elements contributed by each rank
  data_type dtype = data_type::float32;
};

struct broadcast_options {
  void* data = nullptr;
  size_t count = 0;
  data_type dtype = data_type::float32;
  int root = 0;
};

/// Rank r's part of the reduced vector is `counts[r]` elements, the parts
/// back to back in rank order; this rank gets only its own.
struct reducescatter_options {
  const void* input = nullptr;  // the whole vector, left as it is
  void* output = nullptr;       // counts[rank] elements, outside `input`
  std::vector<size_t> counts;   // elements of each rank's part
  data_type dtype = data_type::float32;
  reduce_op op = reduce_op::sum;
  element_finish finish;  // applied to this rank's part, if any
};

/// Bytes to and from each rank; the sums are the buffers' sizes.
struct alltoall_options {
  const void* input = nullptr;
  std::vector<int64_t> send_bytes;
  void* output = nullptr;
  std::vector<int64_t> recv_bytes;
};

/// Bytes of an allreduce per call that keep its copies and its reduction in
/// cache on this host (measured on the ResNet-50 step and a 64 MiB tensor,
/// docs/benchmarks.md): the chunk of a communicator whose calls are cheap.
inline constexpr size_t cache_sized_chunk_bytes = size_t{1} << 20;

/// A CPU communication library (Gloo, MPI, or none for a set of one): the
/// primitives the CPU backend (cpu/cpu_backend.hpp) builds every collective
/// from. Every call blocks until done and throws backend_error on failure.
class communicator {
public:
  virtual ~communicator() = default;

  virtual const char* name() const = 0;

  /// Rendezvous with the other members.
  virtual void connect() = 0;

  /// Bytes of an allreduce this library reduces fastest at a time here (0:
  /// at once); asked once connected, the same answer on every member.
  virtual size_t chunk_bytes() const {
    return 0;
  }

  /// Whether every wait of the calls a collective `resp` makes ends by
  /// itself: at the library's timeout, when a member's process exits, or
  /// at abort() (backend::waits_end). Gloo's and the shared segment's do.
  virtual bool waits_end(const v1::Response& resp) const {
    (void)resp;
    return true;
  }

  virtual void allreduce(const allreduce_options& opts) = 0;
  /// Whether allreduce_pieces() reduces pieces where they lie (the host's
  /// shared segment); else a caller packs them into one buffer for
  /// allreduce(). Asked once connected, the same answer on every member.
  virtual bool reduces_pieces() const {
    return false;
  }
  /// allreduce() of the concatenation of `pieces` (whole elements of
  /// `dtype` each): each piece's contribution read from its `input` where
  /// it has one (never written), else from its `data`, and its result
  /// written to its `data`, with `finish` (if any) applied once to every
  /// element of the result before the call returns. Only where
  /// reduces_pieces().
  virtual void allreduce_pieces(piece_span pieces, data_type dtype, reduce_op op,
                                const element_finish& finish) {
    (void)pieces, (void)dtype, (void)op, (void)finish;
    throw backend_error(std::string(name()) + " does not reduce pieces in place");
  }
  /// Whether reducescatter() of `count` elements in all reduces only each
  /// rank's part; else a caller reduces the whole vector and keeps its part.
  /// The same answer on every member for the same count, once connected.
  virtual bool reduces_scatter(size_t count) const {
    (void)count;
    return false;
  }
  /// Only where reduces_scatter().
  virtual void reducescatter(const reducescatter_options& opts) {
    (void)opts;
    throw backend_error(std::string(name()) + " has no reduce-scatter of its own");
  }
  virtual void allgather(const allgather_options& opts) = 0;
  virtual void broadcast(const broadcast_options& opts) = 0;
  virtual void alltoall(const alltoall_options& opts) = 0;
  /// Where an alltoall's received rows go, given how many each member
  /// sends this one (by member): every member's back to back in rank order.
  using row_placement = std::function<void*(const std::vector<int64_t>& recv_rows)>;
  /// An alltoall in which the senders say how many rows come: sends
  /// `send_rows[p]` rows of `row_bytes` from `input` (back to back in rank
  /// order) to each member p and receives every member's rows where
  /// `place` says, called once. By default an alltoall of the row counts,
  /// then alltoall(): two exchanges.
  virtual void alltoall_rows(const void* input, const std::vector<int64_t>& send_rows,
                             size_t row_bytes, const row_placement& place) {
    const size_t n = send_rows.size();
    std::vector<int64_t> recv_rows(n);
    const std::vector<int64_t> one_count(n, sizeof(int64_t));
    alltoall({send_rows.data(), one_count, recv_rows.data(), one_count});
    alltoall(rows_exchange(input, send_rows, recv_rows, row_bytes, place));
  }
  virtual void barrier() = 0;

  /// Sends `send_bytes` to `peer` while receiving `recv_bytes` from it
  /// (pairwise exchange, the building block of Adasum).
  virtual void sendrecv(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                        int peer) = 0;

  /// Makes a call waiting for peers on the backend's thread throw
  /// backend_error, once the library has let go of its buffers. Called from
  /// another thread (backend::abort()), any number of times; the
  /// communicator is unusable afterwards.
  virtual void abort() = 0;

protected:
  /// The exchange of `send_rows` rows to each member and `recv_rows` rows
  /// from each, `row_bytes` each, its output placed by `place`.
  static alltoall_options rows_exchange(const void* input, const std::vector<int64_t>& send_rows,
                                        const std::vector<int64_t>& recv_rows, size_t row_bytes,
                                        const row_placement& place) {
    alltoall_options o;
    o.input = input;
    for (size_t r = 0; r < send_rows.size(); ++r) {
      o.send_bytes.push_back(send_rows[r] * static_cast<int64_t>(row_bytes));
      o.recv_bytes.push_back(recv_rows[r] * static_cast<int64_t>(row_bytes));
    }
    o.output = place(recv_rows);
    return o;
  }
};

} // namespace troupe::backends
