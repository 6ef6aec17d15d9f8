#pragma once

#include <chrono>
#include <string>

namespace troupe::backends {

/// Pins the calling thread to CPU `core` (TROUPE_THREAD_AFFINITY, Horovod's
/// HOROVOD_THREAD_AFFINITY). Empty when done, else why not.
std::string pin_current_thread(int core);

/// CPUs this process may run on (its affinity mask).
int usable_cpus();

/// How long a thread that waits for the other ranks of its host polls
/// before it sleeps, where each of them has a core of its own (registry's
/// ranks_have_cores): as long as MPI's blocking calls poll. The peer is
/// usually a wake-up behind, and a thread asleep adds a futex round trip.
constexpr std::chrono::milliseconds peer_poll_time{2};

} // namespace troupe::backends
