#pragma once

namespace troupe::test {

/// Two process sets tuned at once (3 ranks: {0, 1} and {1, 2}, static,
/// coordinated by ranks 0 and 1): for `steps` steps each member submits its
/// sets' allreduces (set 1: 40 small int32 tensors, set 2: 4 larger float32
/// ones of integral values, so every sum is exact), rank 1 both sets'
/// together, and checks every result exactly. Returns the exit code.
int run_autotune_set_checks(int rank, int size, int steps);

} // namespace troupe::test
