#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

/// A registered group of ranks that runs its own collectives, concurrently
/// with other sets (see add_process_set). A default-constructed set is the
/// global set (id 0). Collectives on a set take global root ranks.
struct process_set {
  int32_t id = 0;
  std::vector<int> ranks;  // global ranks, ascending

  int size() const;
  /// This process's rank within the set, -1 when not a member.
  int rank() const;
  bool included() const;
  /// Horovod's printed form: ProcessSet(process_set_id=1, ranks=[0, 2], mpi_comm=None)
  std::string to_string() const;
};

} // namespace troupe
