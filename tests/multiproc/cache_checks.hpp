#pragma once

namespace troupe::test {

/// A training-loop workload for the response cache: `steps` steps of the
/// same named allreduces / allgathers / broadcasts whose shapes, dtypes and
/// roots change now and then, plus one-off names that churn the cache, each
/// rank submitting in its own order. Every result is checked exactly.
/// With `tune`, one rank (a different one each time) changes the set's
/// fusion threshold, cycle time and cache capacity every 10 steps, and a
/// float32 / float64 allreduce join the mix. Returns the process exit code.
int run_cache_checks(int rank, int size, int steps, bool tune = false);

} // namespace troupe::test
