#pragma once

#include <functional>

#include "troupe/status.hpp"

namespace troupe::workers {

/// How many planned epochs an elastic worker may fail to start for a
/// reason that is not plainly a peer's before it returns the error (see
/// retry_next_epoch).
constexpr int max_failed_epochs = 2;

/// Elastic jobs: whether a worker whose planned epoch did not start with
/// `why` arrives at the next epoch and waits for its plan (true) or returns
/// `why` (false). A missing peer always moves it on (each wait has its
/// deadline, and troupe-run's --reset-limit bounds the resets): troupe-run
/// gave the epoch up (reset), a peer never published its endpoint or said
/// hello in time (timeout), or one was lost while the epoch started
/// (peer_lost). invalid_argument (two processes claiming one rank) never
/// does. Any other failure counts in `own_failures`: below
/// max_failed_epochs it moves the worker on if troupe-run opened the next
/// epoch's reset barrier (`abandoned`, which may wait a moment for it: a
/// peer's death broke a backend's rendezvous), else it is this host's own
/// (a backend that cannot start here, a full /dev/shm), every later epoch
/// would fail alike, and returned, the error ends the worker (out of
/// init()) and troupe-run blacklists its host.
bool retry_next_epoch(const status& why, int& own_failures,
                      const std::function<bool()>& abandoned);

} // namespace troupe::workers
