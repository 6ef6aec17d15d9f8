#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include "metrics/collective_metrics.hpp"
#include "metrics/reset_metrics.hpp"

namespace prometheus {
class Registry;
}

namespace troupe::metrics {

/// Actors whose mailbox depth is exported (label `actor`).
enum class actor_kind { supervisor, negotiator, coordinator, backend };

/// Where this rank sits in its job (labels-free gauges).
struct rank_position {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
};

struct rank_families;
class set_series;
class autotune_metrics;

/// What the actors of one process set update on this rank, every child
/// labelled `process_set` and resolved when the set starts here, so an
/// update is one atomic operation (histograms: one uncontended lock): no
/// lookup or allocation per collective. Shared by the set's negotiator,
/// coordinator and backend actor; when the last of them lets go, the set's
/// series leave the exposition (Family::Remove).
class set_metrics {
public:
  set_metrics(const rank_families& f, uint32_t set_id, int set_size,
              const std::string& backend);
  ~set_metrics();

  set_metrics(const set_metrics&) = delete;
  set_metrics& operator=(const set_metrics&) = delete;

  /// The backend actor's part: what it executed, bus bytes by the set's size.
  collective_metrics& collectives() {
    return collectives_;
  }

  /// Negotiator: a tensor submitted at `submitted` got its response at
  /// `now` (one clock reading for a whole list's tensors).
  void negotiated(std::chrono::steady_clock::time_point submitted,
                  std::chrono::steady_clock::time_point now) {
    negotiation_seconds_.Observe(std::chrono::duration<double>(now - submitted).count());
  }

  /// Negotiator: one more response list fully executed on this rank.
  void cycle() {
    cycles_.Increment();
  }

  /// Negotiator: tensors submitted and not yet completed.
  void queue_depth(size_t tensors) {
    queue_depth_.Set(static_cast<double>(tensors));
  }

  /// The set's negotiator or coordinator: messages waiting in its mailbox
  /// while it handles one.
  void mailbox_depth(actor_kind who, size_t messages) {
    mailbox_[static_cast<size_t>(who)]->Set(static_cast<double>(messages));
  }

  /// Coordinator, after each stall check: tensors currently stalled (past
  /// the warning time), and whether a warning was just logged.
  void stall_check(size_t stalled, bool warned) {
    stalled_.Set(static_cast<double>(stalled));
    if (warned)
      stall_warnings_.Increment();
  }

  /// Response cache: a request was (or was not) answered from the cache.
  void cache_hit() {
    cache_hits_.Increment();
  }
  void cache_miss() {
    cache_misses_.Increment();
  }

  /// Fast lane: tensors this rank ran from agreed lists (no round trip to
  /// the coordinator).
  void fast_lane_agreed(size_t tensors) {
    fast_lane_agreed_.Increment(static_cast<double>(tensors));
  }

  /// Negotiator of an inner control-tree node: hits it sent up for its
  /// whole subtree (`aggregated`) and as they came (`passed`).
  void tree_hits(uint64_t aggregated, uint64_t passed) {
    tree_aggregated_.Increment(static_cast<double>(aggregated));
    tree_passed_.Increment(static_cast<double>(passed));
  }
  /// The same for full requests: merged for the whole subtree (every rank
  /// of it sent the same request) and as they came.
  void tree_requests(uint64_t merged, uint64_t passed) {
    tree_requests_merged_.Increment(static_cast<double>(merged));
    tree_requests_passed_.Increment(static_cast<double>(passed));
  }
  /// Rounds of hits and of full requests it held for the whole hold.
  void tree_hold_expired(uint64_t hits, uint64_t requests) {
    tree_hits_expired_.Increment(static_cast<double>(hits));
    tree_requests_expired_.Increment(static_cast<double>(requests));
  }

private:
  std::unique_ptr<set_series> series_;  // first: the children below are its
  prometheus::Histogram& negotiation_seconds_;
  prometheus::Counter& cycles_;
  prometheus::Gauge& queue_depth_;
  std::array<prometheus::Gauge*, 4> mailbox_{};  // by actor_kind; no supervisor here
  prometheus::Gauge& stalled_;
  prometheus::Counter& stall_warnings_;
  prometheus::Counter& cache_hits_;
  prometheus::Counter& cache_misses_;
  prometheus::Counter& fast_lane_agreed_;
  prometheus::Counter& tree_aggregated_;
  prometheus::Counter& tree_passed_;
  prometheus::Counter& tree_requests_merged_;
  prometheus::Counter& tree_requests_passed_;
  prometheus::Counter& tree_hits_expired_;
  prometheus::Counter& tree_requests_expired_;
  collective_metrics collectives_;
};

/// The metrics of one rank, owned by its runtime (one per init()): its own
/// registry, the rank-wide series, and the families every process set adds
/// its children to (for_set(), for_autotune()). Later metric sets (elastic, NCCL)
/// register their families on registry(), and per-set children through
/// set_series like the ones here.
class rank_metrics {
public:
  rank_metrics(const rank_position& pos, const std::string& built_backends);
  ~rank_metrics();

  /// What the endpoint serves; families are registered here.
  const std::shared_ptr<prometheus::Registry>& registry() const {
    return registry_;
  }

  /// This rank's part of process set `set_id` (`set_size` ranks, executed
  /// on `backend`: "gloo", "mpi", "local"). A set id reused while the
  /// removed set's actors still wind down shares its series until both let
  /// go.
  std::shared_ptr<set_metrics> for_set(uint32_t set_id, int set_size,
                                       const std::string& backend);

  /// The autotuner's series of process set `set_id` (its coordinator rank).
  std::shared_ptr<autotune_metrics> for_autotune(uint32_t set_id);

  /// Where this rank sits: from init(), and again after every reset (the
  /// job renumbers its ranks).
  void position(const rank_position& pos, int64_t epoch);

  /// The runtime's resets and rendezvous.
  reset_metrics& resets() {
    return resets_;
  }

  /// The ranks this one holds a control connection to in its membership
  /// epoch (control::control_links: N - 1 in a full mesh, its parent and
  /// children along the control tree).
  void control_links(size_t neighbours) {
    control_links_.Set(static_cast<double>(neighbours));
  }

  /// Supervisor: messages waiting in its mailbox (one per rank, no set).
  void supervisor_mailbox_depth(size_t messages) {
    supervisor_mailbox_.Set(static_cast<double>(messages));
  }

private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<rank_families> families_;
  prometheus::Gauge& supervisor_mailbox_;
  prometheus::Gauge& rank_;
  prometheus::Gauge& world_size_;
  prometheus::Gauge& local_rank_;
  prometheus::Gauge& epoch_;
  prometheus::Gauge& control_links_;
  reset_metrics resets_;
};

} // namespace troupe::metrics
