#pragma once

#include "elastic/store.hpp"

#include <cstdint>
#include <string>

// The membership epoch of a job is owned by the rendezvous store, not by a
// process: it is the decimal text under `<job>/epoch` (absent = epoch 0), so
// a process that joins later reads the epoch the others agreed on. Only
// advance_epoch() writes that key.
namespace troupe::elastic {

/// "<job>/epoch".
std::string epoch_key(const std::string& job);

/// The job's current epoch.
int64_t epoch(store_client& store, const std::string& job);

/// Outcome of advance_epoch.
struct epoch_advance {
  bool advanced = false; // this call made the move
  int64_t epoch = 0;     // the epoch now current
};

/// Moves the job from `expected_current` to the next epoch with one
/// compare-and-set: of all callers that start from the same epoch exactly
/// one advances it, and every one of them reads the new epoch back.
epoch_advance advance_epoch(store_client& store, const std::string& job,
                            int64_t expected_current);

} // namespace troupe::elastic
