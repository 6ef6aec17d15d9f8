#include "metrics/launcher_metrics.hpp"

#include <prometheus/family.h>
#include <prometheus/registry.h>

#include "metrics/build_info.hpp"

namespace troupe::metrics {

launcher_metrics::launcher_metrics(int planned_workers, const std::string& built_backends)
  : registry_(std::make_shared<prometheus::Registry>()),
    running_(prometheus::BuildGauge()
               .Name("troupe_launcher_workers_running")
               .Help("Worker processes alive now.")
               .Register(*registry_)
               .Add({})),
    exits_(prometheus::BuildCounter()
             .Name("troupe_launcher_worker_exits_total")
             .Help("Worker processes that ended, by outcome (failure = nonzero status or a "
                   "signal).")
             .Register(*registry_)),
    succeeded_(exits_.Add({{"outcome", "success"}})),
    failed_(exits_.Add({{"outcome", "failure"}})) {
  register_build_info(*registry_, built_backends);
  prometheus::BuildGauge()
    .Name("troupe_launcher_workers")
    .Help("Ranks this launcher starts (-np).")
    .Register(*registry_)
    .Add({})
    .Set(planned_workers);
}

} // namespace troupe::metrics
