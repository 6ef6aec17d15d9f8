#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "metrics/counter.hpp"
#include "metrics/gauge.hpp"
#include "metrics/histogram.hpp"

namespace troupe::metrics {

class registry;
class collective_metrics;
struct collective_families;

/// Actors whose mailbox depth is exported (label `actor`).
enum class actor_kind { supervisor, negotiator, coordinator, backend };

/// Where this rank sits in its job (labels-free gauges).
struct rank_position {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
};

/// The metrics of one rank, owned by its runtime (one per init()) and shared
/// with the actors that update them. Every family is registered and every
/// child resolved in the constructor (or in for_backend(), once per
/// backend), so an update is one relaxed atomic operation: no lookup, lock
/// or allocation per collective.
class rank_metrics {
public:
  rank_metrics(std::shared_ptr<registry> reg, const rank_position& pos,
               const std::string& built_backends);
  ~rank_metrics();

  registry& reg() const {
    return *reg_;
  }

  /// The collective families' children for one backend ("gloo", "mpi",
  /// "local"): given to that backend's actor.
  std::shared_ptr<collective_metrics> for_backend(const std::string& backend);

  /// Negotiator: a tensor submitted at `submitted` got its response.
  void negotiated(std::chrono::steady_clock::time_point submitted) {
    negotiation_seconds_.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted).count());
  }

  /// Negotiator: one more response list fully executed on this rank.
  void cycle() {
    cycles_.inc();
  }

  /// Negotiator: tensors submitted and not yet completed.
  void queue_depth(size_t tensors) {
    queue_depth_.set(static_cast<int64_t>(tensors));
  }

  /// Any actor: messages waiting in its mailbox while it handles one.
  void mailbox_depth(actor_kind who, size_t messages) {
    mailbox_[static_cast<size_t>(who)]->set(static_cast<int64_t>(messages));
  }

  /// Coordinator, after each stall check: tensors currently stalled (past
  /// the warning time), and whether a warning was just logged.
  void stall_check(size_t stalled, bool warned) {
    stalled_.set(static_cast<int64_t>(stalled));
    if (warned)
      stall_warnings_.inc();
  }

  /// Response cache: a request was (or was not) answered from the cache.
  void cache_hit() {
    cache_hits_.inc();
  }
  void cache_miss() {
    cache_misses_.inc();
  }

private:
  std::shared_ptr<registry> reg_;
  int world_size_;
  std::unique_ptr<collective_families> collectives_;
  histogram& negotiation_seconds_;
  counter& cycles_;
  gauge& queue_depth_;
  std::array<gauge*, 4> mailbox_{};
  gauge& stalled_;
  counter& stall_warnings_;
  counter& cache_hits_;
  counter& cache_misses_;
};

/// Buckets shared by the latency histograms: 10 us to ~168 s, factor 2.
std::vector<double> latency_buckets();

} // namespace troupe::metrics
