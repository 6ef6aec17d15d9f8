#pragma once

#include <chrono>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/message_table.hpp"

namespace troupe::coordinator {

struct stall_options {
  bool enabled = true;
  double warning_seconds = 60;  // warn about tensors waiting longer
  double shutdown_seconds = 0;  // fail them after this long; 0 = never
};

/// Finds tensors that some ranks submitted and others did not, as Horovod's
/// stall inspector: a warning naming them and the missing ranks once they
/// wait past the warning time, and (optionally) the list to fail once they
/// wait past the shutdown time. Pure logic; the coordinator drives it.
class stall_inspector {
public:
  using clock = message_table::clock;
  using stalled = std::vector<std::pair<std::string, std::vector<int32_t>>>;

  explicit stall_inspector(stall_options opts);

  /// How often the coordinator should call check().
  std::chrono::milliseconds interval() const;

  struct verdict {
    std::string warning;  // empty when nothing new stalled
    stalled to_fail;      // past the shutdown time
  };

  verdict check(const message_table& table, clock::time_point now);

  /// Tensors warned about that are still waiting (as of the last check).
  size_t stalled_count() const {
    return warned_.size();
  }

  /// Horovod's warning text for `tensors` (up to 6 names per missing rank).
  std::string describe(const stalled& tensors) const;

private:
  stall_options opts_;
  std::set<std::string> warned_;
};

} // namespace troupe::coordinator
