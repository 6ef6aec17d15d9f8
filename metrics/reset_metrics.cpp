#include "metrics/reset_metrics.hpp"

#include <cstddef>

#include <prometheus/family.h>
#include <prometheus/registry.h>

namespace troupe::metrics {

const char* reset_reason_name(reset_reason why) {
  static const char* const names[] = {"peer_lost", "hosts_updated", "requested"};
  return names[static_cast<size_t>(why)];
}

prometheus::Histogram::BucketBoundaries membership_change_buckets() {
  return {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

reset_metrics::reset_metrics(prometheus::Registry& r)
  : rendezvous_(prometheus::BuildHistogram()
                  .Name("troupe_rendezvous_duration_seconds")
                  .Help("Bringing up one membership epoch on this rank: connecting to its "
                        "peers and starting the global process set (at init() and after "
                        "every reset).")
                  .Register(r)
                  .Add({}, membership_change_buckets())) {
  auto& resets = prometheus::BuildCounter()
                   .Name("troupe_resets_total")
                   .Help("reset() calls on this rank, by what it saw: a lost or departed peer "
                         "(peer_lost), troupe-run's announcement of changed hosts "
                         "(hosts_updated), or neither (requested).")
                   .Register(r);
  auto& durations = prometheus::BuildHistogram()
                      .Name("troupe_reset_duration_seconds")
                      .Help("From reset() until the next membership epoch serves (ok), the "
                            "reset failed (failed) or troupe-run removed this process "
                            "(removed).")
                      .Register(r);
  const char* outcomes[] = {"ok", "failed", "removed"};
  for (size_t i = 0; i < 3; ++i) {
    resets_[i] = &resets.Add({{"reason", reset_reason_name(static_cast<reset_reason>(i))}});
    durations_[i] = &durations.Add({{"outcome", outcomes[i]}}, membership_change_buckets());
  }
}

void reset_metrics::reset(reset_reason why, reset_outcome how, double seconds) {
  resets_[static_cast<size_t>(why)]->Increment();
  durations_[static_cast<size_t>(how)]->Observe(seconds);
}

} // namespace troupe::metrics
