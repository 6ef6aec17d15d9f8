#pragma once

#include <chrono>

namespace troupe::workers {

/// How long a thread waiting for a collective yields before it sleeps.
/// `configured` >= 0 (TROUPE_WAIT_SPIN_US) is taken as it is. Otherwise
/// (auto): 100 us where the process may run on `cpus`
/// (backends::usable_cpus()) of at least two per rank of its host
/// (`local_size`), and 0 where not. With a core to
/// spare, yielding saves the wake-up of a sleeping thread (a 4-byte
/// allreduce on one rank: 12-19 us instead of 70-92 us here); without
/// one, each rank's yielding caller takes the core its own collective
/// needs (2 ranks on 2 cores: 4 B 101-120 -> 57-61 us, 200 x 4 KiB
/// 1.09-1.14 -> 0.87-0.93 ms with no yielding; docs/benchmarks.md).
std::chrono::microseconds wait_spin(int configured, int local_size, int cpus);

} // namespace troupe::workers
