#pragma once

#include <memory>
#include <string>

#include "metrics/counter.hpp"
#include "metrics/gauge.hpp"

namespace troupe::metrics {

class registry;

/// What troupe-run serves on /metrics (its base port): the job as the
/// launcher sees it. Elastic jobs will register their families here too
/// (membership epoch, hosts discovered and blacklisted, worker restarts;
/// names reserved in docs/metrics.md), because the launcher's driver owns
/// that state.
class launcher_metrics {
public:
  launcher_metrics(registry& reg, int planned_workers, const std::string& built_backends);

  void worker_started() {
    running_->inc();
  }

  void worker_exited(bool failed) {
    running_->dec();
    (failed ? failed_ : succeeded_)->inc();
  }

private:
  gauge* running_;
  counter* succeeded_;
  counter* failed_;
};

} // namespace troupe::metrics
