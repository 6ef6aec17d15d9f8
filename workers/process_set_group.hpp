#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/backend_actors.hpp"
#include "workers/identity.hpp"

namespace troupe::elastic {
class store_client;
}
namespace troupe::metrics {
class rank_metrics;
}

namespace troupe::actors {
class application_tuning;
}

namespace troupe::workers {

/// The actors that run one process set on this rank.
struct process_set_group {
  actors::negotiator_actor negotiator;
  std::shared_ptr<actors::submission_inbox> inbox;  // the negotiator's
  actors::coordinator_actor coordinator;  // only on the set's lowest rank
  /// The coordinator's shared-memory control channel ("" = none): told to
  /// the members with its handle.
  std::string control_channel;
  /// One backend per device kind; spawn_group creates the CPU one.
  actors::backend_actors backends;
  std::vector<int> members;  // the set's global ranks, ascending
  uint64_t serial = 0;       // registration number: tells a late message apart

  /// Negotiator, coordinator (if here) and every backend.
  std::vector<caf::actor> children() const;
  /// Whether `who` is one of them.
  bool owns(const caf::actor_addr& who) const;
};

/// What a rank needs to start its part of a process set.
struct group_spec {
  uint32_t set_id = 0;
  std::vector<int> members;  // global ranks, ascending; this rank among them
  uint64_t serial = 0;       // registration number: fresh rendezvous keys
  int64_t epoch = 0;         // membership epoch, stamped on control messages
  const identity* id = nullptr;
  const config* cfg = nullptr;
  std::shared_ptr<elastic::store_client> store;
  std::shared_ptr<metrics::rank_metrics> metrics;  // gives the set its series
  caf::actor timeline;  // may be null
  // Where the negotiator records the application's settings (null: nowhere;
  // the global set's outlive the epoch there).
  std::shared_ptr<actors::application_tuning> application;
};

/// Spawns the set's CPU backend actor (not connected yet), its coordinator when
/// this rank is the set's lowest, and its negotiator, which learns the
/// coordinator's handle later (see supervisor.cpp). Throws backend_error
/// when the backend cannot be created.
process_set_group spawn_group(caf::actor_system& sys, const group_spec& spec);

} // namespace troupe::workers
