#pragma once

#include <array>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>

namespace prometheus {
class Registry;
}

namespace troupe::metrics {

/// Why a rank's reset() ran, as the rank saw it (label `reason`).
enum class reset_reason {
  peer_lost,      // a peer of the epoch it left was lost or had left
  hosts_updated,  // troupe-run announced a host change for that epoch
  requested,      // neither: the program reset on its own
};

/// The `reason` label's value: "peer_lost", "hosts_updated", "requested".
const char* reset_reason_name(reset_reason why);

/// How a reset() ended (label `outcome`).
enum class reset_outcome {
  ok,       // the next epoch serves
  failed,   // no epoch serves; reset() must be called again
  removed,  // troupe-run's next plan has no seat for this process
};

/// Bucket bounds (seconds) for membership changes, on the launcher and the
/// ranks alike: 10 ms to 5 min.
prometheus::Histogram::BucketBoundaries membership_change_buckets();

/// A rank's resets, on its registry: how many by reason, how long each took
/// by outcome, and how long each epoch's rendezvous (connecting the peers
/// and starting the global set) took, the first one at init() included.
/// Every child exists from the start with value 0.
class reset_metrics {
public:
  explicit reset_metrics(prometheus::Registry& registry);

  /// reset() returned after `seconds`.
  void reset(reset_reason why, reset_outcome how, double seconds);
  /// An epoch's rendezvous completed after `seconds`.
  void rendezvous(double seconds) {
    rendezvous_.Observe(seconds);
  }

private:
  std::array<prometheus::Counter*, 3> resets_{};      // by reset_reason
  std::array<prometheus::Histogram*, 3> durations_{};  // by reset_outcome
  prometheus::Histogram& rendezvous_;
};

} // namespace troupe::metrics
