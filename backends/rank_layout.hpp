#pragma once

namespace troupe::backends {

/// Where a process sits in a job: globally, on its node, and across nodes.
struct rank_layout {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

} // namespace troupe::backends
