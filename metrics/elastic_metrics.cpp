#include "metrics/elastic_metrics.hpp"

#include "metrics/reset_metrics.hpp"

namespace troupe::metrics {

elastic_metrics::elastic_metrics(prometheus::Registry& r)
  : epoch_(prometheus::BuildGauge()
             .Name("troupe_elastic_epoch")
             .Help("Membership epoch troupe-run published last.")
             .Register(r)
             .Add({})),
    members_(prometheus::BuildGauge()
               .Name("troupe_elastic_members")
               .Help("Workers in the current membership epoch.")
               .Register(r)
               .Add({})),
    resets_(prometheus::BuildCounter()
              .Name("troupe_elastic_resets_total")
              .Help("Reset barriers opened, by reason (failure, leave, peer_lost, "
                    "hosts_updated).")
              .Register(r)),
    barrier_(prometheus::BuildHistogram()
               .Name("troupe_elastic_reset_barrier_seconds")
               .Help("From a reset barrier's opening until every member arrived, exited or was failed.")
               .Register(r)
               .Add({}, membership_change_buckets())),
    hosts_(r) {
  epoch_.Set(-1);
  for (const char* reason : {"failure", "leave", "peer_lost", "hosts_updated"})
    resets_.Add({{"reason", reason}});
}

void elastic_metrics::epoch(int64_t epoch, int members) {
  epoch_.Set(static_cast<double>(epoch));
  members_.Set(members);
}

void elastic_metrics::reset(const std::string& reason) {
  resets_.Add({{"reason", reason}}).Increment();
}

void elastic_metrics::barrier_seconds(double seconds) {
  barrier_.Observe(seconds);
}

void elastic_metrics::hosts(int active, int blacklisted, int cooling_down) {
  hosts_.set(active, blacklisted, cooling_down);
}

} // namespace troupe::metrics
