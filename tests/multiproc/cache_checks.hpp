#pragma once

namespace troupe::test {

/// A training-loop workload for the response cache: `steps` steps of the
/// same named allreduces / allgathers / broadcasts whose shapes, dtypes and
/// roots change now and then, plus one-off names that churn the cache, each
/// rank submitting in its own order. Every result is checked exactly.
/// Returns the process exit code.
int run_cache_checks(int rank, int size, int steps);

} // namespace troupe::test
