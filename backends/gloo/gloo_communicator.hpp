#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "backends/communicator.hpp"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}

namespace troupe::backends {

class tcp_links;

/// CPU collectives over TCP, full mesh built through the launcher's store.
/// The data goes over tcp_links of the set's own, as exchanges, rings and
/// chains whose every wait abort() wakes: a set of 2 to 8 members links
/// every pair and sends everything over them; a larger one links ring
/// neighbours only, for its rings (allreduce, reducescatter, allgather),
/// chains (broadcast; barrier up to 16 members) and exchanges between
/// neighbours. The rest (a larger set's alltoalls, other pairs, and past
/// 16 members small broadcasts and barriers) goes through Gloo's TCP
/// transport, which only such a larger set connects, where each message passes Gloo's
/// network thread and waits for its receive to be announced: a 4-byte
/// exchange took 85-92 us, on a socket of the calling thread's 4-7 us; 2
/// ranks, `--shm 0`, 1 MiB allreduce 1.0-1.8 -> 0.36-0.42 ms, 1 MiB
/// alltoall 0.84-1.08 -> 0.41 ms (2026-11-29).
class gloo_communicator : public communicator {
public:
  explicit gloo_communicator(backend_context ctx);
  ~gloo_communicator() override;

  const char* name() const override {
    return "gloo";
  }
  void connect() override;
  /// 1 MiB (the links' ring steps cost little, and a chunk's copies and
  /// reduction stay in cache: 2 ranks, `--shm 0`, 64 MiB 57-58 -> 20-21
  /// ms, the ResNet-50 step 122-123 -> 34-36 ms, 2026-11-29), or more in a
  /// set of more than 8: each of its ring's steps carries a chunk's 1 / n,
  /// and at least ring_step_bytes, so that a large ring's steps do not
  /// shrink to a latency each.
  size_t chunk_bytes() const override;
  void allreduce(const allreduce_options& opts) override;
  /// Of this class's own, its waits woken by abort() as
  /// ring_allreduce()'s: one exchange over the links where the whole
  /// vector is at most 64 KiB on up to 8 members (each rank sends every
  /// other its part and reduces its own in rank order), else the
  /// reduce-scatter half of the ring: half an allreduce's traffic.
  bool reduces_scatter(size_t count) const override;
  void reducescatter(const reducescatter_options& opts) override;
  void allgather(const allgather_options& opts) override;
  /// Up to 64 KiB on up to 8 members, one message from the root to each;
  /// up to 64 KiB on more than 16, Gloo's (log2(n) rounds); else a chain
  /// along the ring from the root in 256 KiB segments, each rank passing
  /// one on while it takes the next (the tensor crosses each link once).
  void broadcast(const broadcast_options& opts) override;
  void alltoall(const alltoall_options& opts) override;
  /// Where every pair is linked, one exchange: each message's length gives
  /// its rows (else the counts, then the rows, through Gloo).
  void alltoall_rows(const void* input, const std::vector<int64_t>& send_rows, size_t row_bytes,
                     const row_placement& place) override;
  /// One exchange of empty messages on up to 8 members; on up to 16 twice
  /// around the ring from rank 0 (arrivals, then the release); else Gloo's.
  void barrier() override;
  void sendrecv(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                int peer) override;
  /// An allreduce in a ring (reduce-scatter, then allgather) of this
  /// class's own, whose every wait abort() wakes, over the links. Gloo's algorithms
  /// wait on buffers out of our reach, and a send already queued on a pair
  /// is not woken when the pair fails (its peer died mid-transfer): it
  /// waits out the Gloo timeout. Each chunk is reduced on one rank and
  /// copied to the others, so every rank holds the same bits. The
  /// shared-memory path's cross-host step, and allreduce().
  void ring_allreduce(const allreduce_options& opts);
  /// An allreduce as one exchange over the set's tcp_links: every rank
  /// sends its whole buffer to every other and reduces all of them in rank
  /// order (the same bits everywhere); abort() wakes it.
  /// allreduce() and ring_allreduce() take it for up to 8 members where
  /// (members - 1) x the tensor is at most 64 KiB: one message's latency
  /// instead of the ring's 2 (members - 1). In a larger set (links to ring
  /// neighbours only) it is ring_allreduce().
  void direct_allreduce(const allreduce_options& opts);
  /// Fails every pair of the context (Gloo's own path for its timeout):
  /// their pending sends and receives throw, and Gloo's thread no longer
  /// touches their buffers (closing a pair alone wakes no waiter); then
  /// wakes the waits of shift() through Gloo, and the tcp links'.
  void abort() override;

private:
  class waiting;

  // Every pair of members linked (2 to direct_max_members), else ring
  // neighbours only.
  bool meshed() const;
  // The member `offset` places after this one around the ring (before it
  // where negative).
  int neighbour(int offset) const;
  bool goes_direct(const allreduce_options& opts) const;
  // A broadcast of at most direct_max_bytes, or a barrier, goes over the
  // links as one exchange where every pair is linked (a larger broadcast sent
  // by the root to every member at once would load its link (members - 1)
  // times).
  bool over_links(size_t bytes) const;
  // No message that way, in shift().
  static constexpr int no_rank = -1;
  // One step of a ring, a chain or a pairwise exchange: `give` to rank
  // `to`, `take` from rank `from` (either may be empty, or no_rank), both
  // done before it returns; over the links where this rank has them, else
  // through Gloo under `slot`.
  void shift(const void* give, size_t give_bytes, int to, void* take, size_t take_bytes,
             int from, uint64_t slot);


  // Runs a Gloo call; when it throws, first fails every pair, so that no
  // other pair may still write the caller's buffer once the error is seen.
  template <class F>
  void guarded(const char* what, F&& f);

  backend_context ctx_;
  // Guards gloo_ and links_ (written by connect()), aborted_ and waiting_
  // for abort().
  std::mutex mutex_;
  // Only in a set of more than 8 members (see connect()).
  std::shared_ptr<gloo::Context> gloo_;
  // Every pair's (meshed()) or ring neighbours'; none in a set of one.
  std::unique_ptr<tcp_links> links_;
  bool aborted_ = false;
  // The buffers of shift() through Gloo while they are in use.
  std::vector<gloo::transport::UnboundBuffer*> waiting_;
};

} // namespace troupe::backends
