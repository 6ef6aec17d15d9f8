#pragma once

#include <functional>

#include "troupe/status.hpp"

namespace troupe::workers {

/// How many planned epochs in a row an elastic worker may fail to start
/// before it returns the error (see retry_next_epoch).
constexpr int max_failed_epochs = 2;

/// Elastic jobs: whether a worker whose planned epoch did not start with
/// `why`, the `failed`-th epoch in a row it could not start, arrives at the
/// next epoch and waits for its plan (true) or returns `why` (false). A
/// missing peer moves it on: troupe-run gave the epoch up (reset), a peer
/// never published its endpoint or said hello in time (timeout,
/// peer_lost), or one was lost while the epoch started (peer_lost). So
/// does another failure (a backend's rendezvous broken by a peer that
/// died) once troupe-run has opened the next epoch's reset barrier
/// (`abandoned`, asked only then), except invalid_argument (two processes
/// claiming one rank). Anything else is this host's own (a backend that
/// cannot start here, a full /dev/shm): every later epoch would fail the
/// same way. Neither moves it on past max_failed_epochs: returned, the
/// error ends the worker (out of init()) and troupe-run blacklists its host,
/// where moving on would reset forever.
bool retry_next_epoch(const status& why, int failed, const std::function<bool()>& abandoned);

} // namespace troupe::workers
