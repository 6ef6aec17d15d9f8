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

/// The fast lane's workload (docs/architecture.md, "Agreement without the
/// coordinator"): `steps` steps of cached allreduces submitted in a random
/// order per rank, with shape and dtype changes, one-off names (evictions
/// under a small cache), a broadcast now and then, and every 50 steps a
/// cached tensor one rank sends with another dtype, which must fail on
/// every rank naming it. Every result is checked exactly.
int run_fast_lane_checks(int rank, int size, int steps);

/// Allreduces every step of the fast-lane LRU workload agrees on the board.
inline constexpr int fast_lane_lru_stable = 4;

/// `steps` steps of fast_lane_lru_stable cached allreduces plus one under a
/// name never seen before (as an unnamed allreduce is): under a cache that
/// the new names fill, the evictions must take those, not the allreduces
/// agreed on the board every step. Every result is checked exactly.
int run_fast_lane_lru_checks(int rank, int size, int steps);

} // namespace troupe::test
