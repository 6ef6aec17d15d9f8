#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "actors/protocols.hpp"
#include "workers/config.hpp"
#include "workers/identity.hpp"
#include "workers/process_set_table.hpp"

namespace caf {
class actor_system;
}

namespace troupe::workers {

class control_dialer;

/// What any thread may read about the registered process sets. Never
/// changed once published: the registry publishes a new one per change.
struct process_set_snapshot {
  process_set_snapshot(int world_size, int my_rank) : table(world_size), rank(my_rank) {
  }
  process_set_table table;
  /// Where collectives go in, for every set this rank is a member of.
  std::map<int32_t, actors::set_entrance> entrances;
  /// That of set `id`; null when this rank has none.
  const actors::set_entrance* entrance(int32_t id) const {
    auto it = entrances.find(id);
    return it == entrances.end() ? nullptr : &it->second;
  }
  /// The negotiator of set `id`; a null handle when this rank has none.
  actors::negotiator_actor negotiator(int32_t id) const {
    const auto* e = entrance(id);
    return e ? e->negotiator : actors::negotiator_actor{};
  }
  /// The membership epoch the snapshot belongs to, and this process's
  /// global rank in it.
  int64_t epoch = 0;
  int rank = 0;
  /// Not ok while no membership epoch serves (a reset in progress, or one
  /// that failed): every collective and process-set call fails with it.
  status unavailable;
};

/// Where the registry publishes its snapshots; readers never block it.
class process_set_snapshots {
public:
  std::shared_ptr<const process_set_snapshot> load() const {
    return std::atomic_load(&current_);
  }
  void store(std::shared_ptr<const process_set_snapshot> next) {
    std::atomic_store(&current_, std::move(next));
  }
  /// Publishes `next` only if `base` is still current; false when another
  /// writer (a reset) came first.
  bool replace(const std::shared_ptr<const process_set_snapshot>& base,
               std::shared_ptr<const process_set_snapshot> next) {
    auto expected = base;
    return std::atomic_compare_exchange_strong(&current_, &expected, std::move(next));
  }

private:
  std::shared_ptr<const process_set_snapshot> current_;
};

/// Spawns the process-set registry of this rank: a detached actor, since
/// registration waits for collectives on the global set. It serialises the
/// calls of all threads in its mailbox; no API lock is held meanwhile.
///
/// Protocol: actors::process_set_registry_actor. (add_set, ranks) ->
/// (status, id) and (remove_set, id) -> (status, id) are collective over the global set, called by every rank in the same order
/// (Horovod's contract): an allgather of the arguments checks that the
/// ranks agree, members start (or stop) their part of the set, and a
/// global barrier returns the call everywhere once every rank is done, so
/// a member's first collective on a new set finds the set everywhere. The
/// allgather and barrier carry a deadline (TROUPE_START_TIMEOUT): a rank
/// that never makes the call fails it on every rank with an error naming
/// that rank, and its own late call fails the same way.
///
/// `published` holds the global set (and its negotiator) of the registry's
/// epoch when spawned; the registry publishes every change there, unless a
/// reset has replaced the snapshot meanwhile (the call then fails with
/// status_code::reset). Along a control tree, `dialer` connects a member
/// to the ranks it talks to directly in each new set (control_dialer::
/// dial_set) before the set starts.
actors::process_set_registry_actor
spawn_process_set_registry(caf::actor_system& sys, actors::supervisor_actor supervisor,
                                      const identity& id, const config& cfg,
                                      std::shared_ptr<process_set_snapshots> published,
                                      std::shared_ptr<const control_dialer> dialer);

} // namespace troupe::workers
