#pragma once

namespace troupe::test {

/// Process sets on 4 ranks, started with static sets [0, 2] (id 1) and
/// [1, 3] (id 2) and TROUPE_DYNAMIC_PROCESS_SETS=1: the even/odd example,
/// overlapping sets used at once, every error case, removal failing pending
/// work, and 100 add/remove rounds leaking no threads or sockets.
/// Returns the process exit code.
int run_process_set_checks(int rank, int size);

} // namespace troupe::test
