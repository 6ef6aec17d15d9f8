#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <cstdint>
#include <map>
#include <vector>

#include <caf/actor.hpp>

#include "troupe/status.hpp"
#include "workers/config.hpp"
#include "workers/identity.hpp"
#include "workers/process_set_table.hpp"

namespace caf {
class actor_system;
}

namespace troupe::workers {

/// Registers and removes process sets with the other ranks, and knows the
/// negotiator of every set this rank belongs to. Both operations are
/// collective over the global set, called by every rank in the same order
/// (Horovod's contract): an allgather of the arguments checks that the
/// ranks agree, then members start (or stop) their part of the set, and a
/// global barrier returns the call everywhere only once every rank is done,
/// so a member's first collective on a new set finds the set everywhere.
/// Not thread-safe: the API serialises calls.
class process_set_registry {
public:
  process_set_registry(caf::actor_system& sys, caf::actor supervisor,
                       caf::actor global_negotiator, const identity& id, const config& cfg);

  /// The negotiator of set `id`, or a null handle when this rank is not a
  /// member or the set is unknown.
  caf::actor negotiator(int32_t id) const;

  /// Global ranks of set `id` (ascending), or null when unknown.
  const std::vector<int>* ranks(int32_t id) const {
    return table_.ranks(id);
  }

  /// Registers a set of global `ranks`; `id` receives its id.
  status add(const std::vector<int>& ranks, int32_t& id);

  /// Removes set `id`: collectives pending on it fail.
  status remove(int32_t id);

private:
  // Runs an allgather of `values` on the global set and returns every
  // rank's values, or the error.
  status gather(const std::string& name, std::vector<int32_t> values,
                std::vector<std::vector<int32_t>>& all);
  status barrier(const std::string& name);

  caf::actor_system& sys_;
  caf::actor supervisor_;
  const identity& id_;
  const config& cfg_;
  process_set_table table_;
  std::map<int32_t, caf::actor> negotiators_;
  uint64_t serial_ = 0;  // calls so far: the same on every rank
};

} // namespace troupe::workers
