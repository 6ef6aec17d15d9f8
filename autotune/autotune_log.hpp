#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "autotune/settings.hpp"

namespace troupe::autotune {

/// Horovod's autotune CSV (HOROVOD_AUTOTUNE_LOG): a header, then one row per
/// scored setting, one per finalist scored again (finalist_rescoring) and,
/// once the search ends, the frozen setting again:
///   hierarchical_allreduce,hierarchical_allgather,torus_allreduce,
///   cache_enabled,cycle_time_ms,tensor_fusion_threshold,score,
///   fusion_chunk_bytes
/// No backend has hierarchical or torus collectives, so those columns are
/// 0; the threshold is in MiB and the score in bytes per microsecond, as
/// Horovod's. The last column is Troupe's (the CPU allreduce chunk; -1: the
/// configured one), after Horovod's seven so that readers of those by
/// position still work. Each row is flushed, so the file is current while the job
/// runs.
class autotune_log {
public:
  /// Creates (truncates) `path`; throws std::runtime_error naming it.
  explicit autotune_log(const std::string& path);

  /// One row: `s` scored `bytes_per_second`.
  void row(const settings& s, double bytes_per_second);

private:
  std::ofstream out_;
};

/// Where process set `set_id`'s log goes in membership epoch `epoch`:
/// `path` itself for the global set in epoch 0 (Horovod's file), else with
/// ".set<id>" and/or ".epoch<E>" before the extension ("tune.csv" ->
/// "tune.set2.csv", "tune.epoch1.csv").
std::string log_path(const std::string& path, uint32_t set_id, int64_t epoch);

} // namespace troupe::autotune
