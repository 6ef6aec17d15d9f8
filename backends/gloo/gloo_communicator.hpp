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

/// CPU collectives over Gloo's TCP transport, full mesh built through the
/// launcher's store.
class tcp_links;

class gloo_communicator : public communicator {
public:
  explicit gloo_communicator(backend_context ctx);
  ~gloo_communicator() override;

  const char* name() const override {
    return "gloo";
  }
  void connect() override;
  void allreduce(const allreduce_options& opts) override;
  /// Of this class's own, its waits woken by abort() as
  /// ring_allreduce()'s: one exchange where the whole vector is at most
  /// 64 KiB on up to 8 members (each rank sends every other its part and
  /// reduces its own in rank order), else the reduce-scatter half of the
  /// ring: half an allreduce's traffic.
  bool reduces_scatter(size_t count) const override;
  void reducescatter(const reducescatter_options& opts) override;
  void allgather(const allgather_options& opts) override;
  void broadcast(const broadcast_options& opts) override;
  void alltoall(const alltoall_options& opts) override;
  void barrier() override;
  void sendrecv(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                int peer) override;
  /// An allreduce in a ring (reduce-scatter, then allgather) of this
  /// class's own, whose every wait abort() wakes. Gloo's algorithms wait on
  /// buffers out of our reach, and a send already queued on a pair is not
  /// woken when the pair fails (its peer died mid-transfer): it waits out
  /// the Gloo timeout. Each chunk is reduced on one rank and copied to the
  /// others, so every rank holds the same bits. For the shared-memory
  /// path's cross-host step.
  void ring_allreduce(const allreduce_options& opts);
  /// An allreduce as one exchange over the set's tcp_links: every rank
  /// sends its whole buffer to every other and reduces all of them in rank
  /// order (the same bits everywhere); abort() wakes it.
  /// allreduce() and ring_allreduce() take it for up to 8 members where
  /// (members - 1) x the tensor is at most 64 KiB: one message's latency
  /// instead of the ring's 2 (members - 1).
  void direct_allreduce(const allreduce_options& opts);
  /// Fails every pair of the context (Gloo's own path for its timeout):
  /// their pending sends and receives throw, and Gloo's thread no longer
  /// touches their buffers (closing a pair alone wakes no waiter); then
  /// wakes the waits of sendrecv(), ring_allreduce() and reducescatter(),
  /// and the tcp links'.
  void abort() override;

private:
  class waiting;

  bool goes_direct(const allreduce_options& opts) const;


  // Runs a Gloo call; when it throws, first fails every pair, so that no
  // other pair may still write the caller's buffer once the error is seen.
  template <class F>
  void guarded(const char* what, F&& f);

  backend_context ctx_;
  // Guards gloo_ and links_ (written by connect()), aborted_ and waiting_
  // for abort().
  std::mutex mutex_;
  std::shared_ptr<gloo::Context> gloo_;
  // The small exchanges' (direct_allreduce, reducescatter's direct path),
  // where the set has at most direct_max_members.
  std::unique_ptr<tcp_links> links_;
  bool aborted_ = false;
  // The buffers of sendrecv(), ring_allreduce() and reducescatter() while
  // they are in use.
  std::vector<gloo::transport::UnboundBuffer*> waiting_;
};

} // namespace troupe::backends
