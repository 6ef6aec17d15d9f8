#pragma once

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

namespace prometheus {
class Registry;
template <class T>
class Family;
} // namespace prometheus

namespace troupe::metrics {

/// What troupe-run serves on /metrics (its base port): the job as the
/// launcher sees it. Elastic jobs register their families on registry()
/// too (elastic_metrics), because the launcher's driver owns that state.
class launcher_metrics {
public:
  launcher_metrics(int planned_workers, const std::string& built_backends);

  const std::shared_ptr<prometheus::Registry>& registry() const {
    return registry_;
  }

  /// `n` worker processes started, or ended (under --mpi mpirun stands for
  /// all of them: its one outcome counts for every rank).
  void workers_started(int n = 1) {
    running_.Increment(n);
  }
  void workers_exited(bool failed, int n = 1) {
    running_.Decrement(n);
    (failed ? failed_ : succeeded_).Increment(n);
  }

private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge& running_;
  prometheus::Family<prometheus::Counter>& exits_;
  prometheus::Counter& succeeded_;
  prometheus::Counter& failed_;
};

} // namespace troupe::metrics
