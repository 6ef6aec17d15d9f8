#pragma once

#include <memory>
#include <vector>

#include "actors/tensor_entry.hpp"
#include "troupe/elastic.hpp"
#include "troupe/status.hpp"
#include "troupe/tuning.hpp"
#include "workers/config.hpp"
#include "workers/identity.hpp"

namespace troupe::workers {

struct process_set_snapshot;  // workers/process_set_registry.hpp

/// One rank's running runtime: the actor system (the only root of state),
/// its supervisor and the global process set's group. Created by start(),
/// stopped by its destructor.
class runtime {
public:
  /// Bootstraps from the environment: store, endpoint exchange with every
  /// peer, backend rendezvous. Every step is bounded by the start timeout;
  /// on failure returns null and sets `result` to what did not complete.
  /// `generation` numbers this process's starts (0, 1, ...): the store keys
  /// of one start are kept apart from those of the previous ones.
  static std::unique_ptr<runtime> start(status& result, int generation);

  /// In-place reset: stops every process set here (pending collectives fail
  /// with status_code::reset, peers are told), joins the next membership
  /// epoch through the store (the job's epoch counter is the store's, so
  /// every process agrees on it) and rebuilds the control plane, the
  /// backend and the global set for the members that joined: the previous
  /// ranks neither lost nor shut down, renumbered in their previous order.
  /// Same process, same actor system. Process sets other than the global
  /// one are gone afterwards. Every rank of the new membership calls it.
  /// Elastic jobs join troupe-run's next plan instead (elastic_join.hpp):
  /// joiners and leavers are the driver's decision; status_code::removed
  /// when the plan has no place for this process.
  status reset();

  /// Stops the runtime (stop()).
  ~runtime();

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Leaves the job: peers are told, pending collectives (and a process-set
  /// call in progress) fail with status_code::shut_down. Idempotent.
  void stop();

  /// This rank in the current membership epoch.
  std::shared_ptr<const identity> id() const;
  /// The current membership epoch (0 until the first reset).
  int64_t epoch() const;
  /// Elastic jobs: what troupe-run announced about the hosts while the
  /// current epoch ran (one store round trip); none otherwise.
  host_update hosts_updated() const;
  /// Elastic jobs: whether a member of the current epoch never served
  /// before (see elastic_join.hpp).
  bool epoch_has_newcomers() const;
  const config& cfg() const;

  /// What a collective needs of process set `id`, read from the registry's
  /// latest snapshot without a lock or a copy of its ranks.
  struct set_lookup {
    status unavailable;  // see process_set_snapshot::unavailable
    bool known = false;
    int size = 0;
    int my_index = -1;    // this rank's index in the set, -1: not a member
    int root_index = -1;  // `global_root`'s index, -1: not a member
    std::shared_ptr<const process_set_snapshot> snapshot;  // what was read
  };
  set_lookup lookup(int32_t id, int global_root = -1) const;

  /// Hands collectives to the negotiator of their process set (entries of
  /// a batch share one), from the snapshot `where` read: a collective reads
  /// the registry's state once. The calling thread never waits.
  void submit(actors::entry_batch batch, const set_lookup& where);

  /// Global ranks of set `id` (ascending); empty when unknown.
  std::vector<int> process_set_ranks(int32_t id) const;

  /// Registration and removal, collective over every rank (see
  /// process_set_registry.hpp): a message to the registry actor. The caller
  /// waits for the answer, bounded by the registry's deadlines, holding no
  /// lock, so other threads' calls go on meanwhile.
  status add_process_set(const std::vector<int>& ranks, int32_t& id);
  status remove_process_set(int32_t id);

  /// Changes settings of process set `id` (this rank must be a member):
  /// one message to the set's coordinator, which applies it before its next
  /// response list, on every member at that list.
  status tune(int32_t id, const tuning& change);

  /// Writes this rank's timeline to `path` (rank inserted before .json)
  /// from now on; needs TROUPE_TIMELINE set (DYNAMIC or a path).
  status start_timeline(const std::string& path, bool mark_cycles);
  status stop_timeline();

private:
  struct impl;
  explicit runtime(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::workers
