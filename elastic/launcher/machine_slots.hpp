#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace troupe::elastic::launcher {

/// Elastic mode's per-machine indices (TROUPE_MACHINE_LOCAL_RANK): a worker
/// binds per-machine resources by its index at init() (its metrics port,
/// BASE + 1 + index) and keeps them for its life, while its local rank
/// changes with every plan. So an index belongs to a worker until its
/// process ends, and a new worker takes the lowest index no live worker on
/// its machine holds.
class machine_slots {
public:
  /// The index for `worker` on `machine` (one name for every host that is
  /// this machine).
  int claim(int64_t worker, const std::string& machine);
  /// `worker`'s process ended: its index is free again.
  void release(int64_t worker) {
    held_.erase(worker);
  }

private:
  std::map<int64_t, std::pair<std::string, int>> held_;  // worker -> (machine, index)
};

} // namespace troupe::elastic::launcher
