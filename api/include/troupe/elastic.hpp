#pragma once

namespace troupe {

/// What troupe-run's elastic driver announced about the job's hosts while
/// the current membership epoch ran (values as in elastic::host_change).
enum class host_update {
  none = 0,
  added = 1,    // slots appeared: the next epoch can grow
  removed = 2,  // hosts or slots of members went away
  mixed = 3,    // both
};

} // namespace troupe
