#include "metrics/launcher_metrics.hpp"

#include "metrics/build_info.hpp"
#include "metrics/registry.hpp"

namespace troupe::metrics {

launcher_metrics::launcher_metrics(registry& reg, int planned_workers,
                                   const std::string& built_backends) {
  register_build_info(reg, built_backends);
  reg.add_gauge("troupe_launcher_workers", "Ranks this launcher starts (-np).")
    .with()
    .set(planned_workers);
  running_ = &reg.add_gauge("troupe_launcher_workers_running", "Worker processes alive now.")
                .with();
  auto& exits = reg.add_counter("troupe_launcher_worker_exits_total",
                                "Worker processes that ended, by outcome (failure = nonzero "
                                "status or a signal).",
                                {"outcome"});
  succeeded_ = &exits.with({"success"});
  failed_ = &exits.with({"failure"});
}

} // namespace troupe::metrics
