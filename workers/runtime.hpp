#pragma once

#include <memory>
#include <vector>

#include "actors/tensor_entry.hpp"
#include "troupe/status.hpp"
#include "workers/config.hpp"
#include "workers/identity.hpp"

namespace troupe::workers {

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

  /// Leaves the job: peers are told, pending collectives fail with
  /// status_code::shut_down.
  ~runtime();

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  const identity& id() const;
  const config& cfg() const;

  /// Hands collectives to the negotiator of their process set (entries of
  /// a batch share one); never blocks.
  void submit(actors::entry_batch batch);

  /// Process sets (see process_set_registry): global ranks of set `id` or
  /// null; registration and removal, collective over every rank.
  const std::vector<int>* process_set_ranks(int32_t id) const;
  status add_process_set(const std::vector<int>& ranks, int32_t& id);
  status remove_process_set(int32_t id);

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
