#pragma once

// The state of one runtime and the steps that change it, shared by
// runtime.cpp (start, stop, the API), runtime_bootstrap.cpp (bringing a
// membership epoch up) and runtime_reset.cpp (leaving it, resetting).
// CAF is inside: include it only there.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/io/all.hpp>

#include "actors/negotiator.hpp"
#include "actors/protocols.hpp"
#include "backends/registry.hpp"
#include "elastic/store.hpp"
#include "metrics/endpoint.hpp"
#include "metrics/host_state_metrics.hpp"
#include "metrics/rank_metrics.hpp"
#include "workers/control_dialer.hpp"
#include "workers/control_plane.hpp"
#include "workers/launcher_watch.hpp"
#include "workers/process_set_registry.hpp"
#include "workers/runtime.hpp"

namespace troupe::workers {

namespace runtime_steps {

using clock = std::chrono::steady_clock;

inline clock::duration seconds(double s) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

// Bootstrap and reset are bounded by TROUPE_START_TIMEOUT from now.
inline clock::time_point start_deadline(const config& cfg) {
  return clock::now() + seconds(cfg.start_timeout_seconds);
}

// Under mpirun, what a rank that failed to start puts in the endpoint
// allgather, before why (a published endpoint never starts so).
constexpr const char* start_failed_mark = "!start-failed: ";

} // namespace runtime_steps

// One membership epoch of this rank: who it is, and the actors that serve
// it. A reset replaces it whole.
struct epoch_run {
  int64_t epoch = 0;
  std::shared_ptr<const identity> id;
  // Null for a job of one.
  std::shared_ptr<const control_dialer> dialer;
  actors::supervisor_actor supervisor;
  actors::process_set_registry_actor registry;
};

// Declared first in each runtime call made on the application's thread.
// CAF keeps, per thread, a strong reference to the logger of the actor
// system the thread last spawned an actor in (a scoped_actor is one), and
// ~actor_system waits until its logger is gone: a thread that had called
// in and lives on (the one that called init(), blocked in join()) hung a
// shutdown() made on any other thread for good. Dropped when the call ends.
class caller_thread_scope {
public:
  caller_thread_scope() = default;
  caller_thread_scope(const caller_thread_scope&) = delete;
  caller_thread_scope& operator=(const caller_thread_scope&) = delete;
  ~caller_thread_scope() {
    caf::logger::set_current_actor_system(nullptr);
  }
};

// The runtime of one process: its configuration, actor system and
// connections, and the membership epoch it serves.
struct runtime::impl {
  using clock = runtime_steps::clock;

  identity base;  // as started: epoch 0's identity and job prefix
  config cfg;
  control_plane plane;
  // Metrics belong to this runtime instance: a later init() starts from zero.
  std::shared_ptr<metrics::rank_metrics> metrics;
  // Elastic jobs: troupe-run's hosts by state, as last read from the store.
  std::unique_ptr<metrics::host_state_metrics> host_states;
  caf::actor_system_config caf_cfg;
  caf::actor_system system;
  // Null for a job of one, or under mpirun. Two connections: backend
  // rendezvous can hold its client for up to the Gloo timeout waiting for a
  // peer, and a reset's epoch and membership calls must not queue behind it.
  std::shared_ptr<elastic::store_client> store;
  std::shared_ptr<elastic::store_client> rendezvous_store;
  // Under troupe-run: ends this process when troupe-run dies.
  std::unique_ptr<launcher_watch> watch;
  std::optional<backends::external_launch> launch;
  std::shared_ptr<process_set_snapshots> sets = std::make_shared<process_set_snapshots>();
  // Opens and makes this rank's control-plane connections (TLS or plain).
  caf::io::middleman_actor connections;
  // Published once: peers find each epoch's supervisor through it.
  caf::actor directory;
  // The trace writer, one per runtime so that a reset neither truncates
  // the file nor hands it to another process; null without TROUPE_TIMELINE.
  caf::actor timeline;
  uint16_t directory_port = 0;
  // The current epoch. The mutex is held only to read or swap it, never
  // across a wait; `change_mtx` serialises reset() and stop().
  mutable std::mutex run_mtx;
  epoch_run run;
  std::mutex change_mtx;
  bool stopped = false;
  // Set by stop() before it takes change_mtx: an elastic reset waiting for
  // troupe-run's next plan (up to TROUPE_ELASTIC_TIMEOUT) gives up on it.
  std::atomic<bool> stop_requested{false};
  std::vector<int> last_alive;  // previous ranks seen alive at the last reset
  // Elastic jobs: whether this process has served in an epoch (it holds
  // state a newcomer needs), and whether the current epoch has newcomers.
  bool veteran = false;
  // Read without change_mtx: asking must not wait out a reset in progress.
  std::atomic<bool> newcomers{false};
  // Whether the epoch left last had lost a peer, or a peer had left it.
  bool peer_gone = false;
  // The global set's settings the application set (tune(), on any rank),
  // as the coordinator's lists last named them: each epoch's global
  // negotiator records them here, and a reset's new coordinator is told
  // them again (tune_again), so they outlive the epoch; other process sets'
  // do not.
  std::shared_ptr<actors::application_tuning> application =
    std::make_shared<actors::application_tuning>();
  // Last member: stops (and frees its port) first.
  std::unique_ptr<metrics::endpoint> metrics_server;

  impl(identity i, config c, control_plane p);

  epoch_run current() const;

  // `path` for this process: by rank as started, or in an elastic job by
  // worker id (ranks are reused by other processes after a reset).
  std::string own_timeline_path(const std::string& path) const;

  // DYNAMIC: the writer exists but writes only between start_timeline()
  // and stop_timeline().
  void start_timeline_writer();

  void mark(const std::string& name);

  // What troupe-run announced for `epoch` (elastic jobs), none otherwise.
  // Also refreshes the hosts by state: a host changes state with an
  // announcement or a reset, except a cooldown that ends without changing
  // the seats.
  host_update announced(int64_t epoch) const;

  // troupe-run's hosts by state into this rank's metrics; throws
  // store_error.
  void read_host_states() const;

  // Off unless TROUPE_METRICS_PORT is set; this rank serves on
  // port + 1 + its index on this machine (the launcher has the port itself),
  // so ranks of two troupe-run "hosts" on one machine never collide.
  status serve_metrics();

  // Publishes the directory (once per runtime), on the listen address only.
  status publish_directory();

  // Connects to the supervisors of `next`'s epoch that this rank dials
  // (control::control_links: every lower rank in a small job, the parent
  // in the global set's control tree in a large one; found through that
  // rank's directory) and introduces this one; the others dial us. The
  // directories' addresses go through the store (keys under the epoch's
  // job prefix) or, under mpirun, an MPI allgather, each with the control
  // fanout its rank was given, so every rank plans the same links.
  status connect_peers(epoch_run& next, const identity& id, clock::time_point deadline);

  // Starts the global set; `entrance` receives where its collectives go in.
  status start_group(const epoch_run& next, const identity& id, clock::time_point deadline,
                     actors::set_entrance& entrance);

  // Brings up epoch `epoch` as `id`: supervisor, peers, the global set,
  // the process-set registry. What started is kept even on failure, so
  // stop() and reset() can take it down.
  status bootstrap(int64_t epoch, const identity& id, clock::time_point deadline);

  // Elastic jobs: takes the seat troupe-run's newest plan (epoch >= `first`)
  // gives this process and brings that epoch up. When a member fails while
  // the epoch starts, the driver plans the next one and the bootstrap
  // cannot complete: this process then moves on to that plan.
  status enter_planned(int64_t first, std::vector<int> lost = {});

  // Takes the current epoch's actors down: (shutdown) tells the peers and
  // waits for them; (reset) answers which previous ranks can join the next
  // epoch.
  std::vector<int> leave_epoch(std::optional<int64_t> next_epoch);

  // The ranks of an epoch of `size` not in `alive` (leave_epoch's answer;
  // none when it is empty): the peers this rank lost, which troupe-run
  // then does not wait for at the next barrier.
  static std::vector<int> lost_ranks(const std::vector<int>& alive, int size);

  // While no epoch serves (a reset in progress or failed), every
  // collective and process-set call fails at once with `why`.
  void unavailable(status why);

  status reset();

  // After a reset: sends `application` to the new epoch's global set,
  // through this rank's negotiator, as a restore (RequestList.restored:
  // it fills only what no change of the new epoch set). Survivors send the
  // same settings, those the old epoch's lists last named, so the new
  // coordinator pins them whichever rank it is and whoever set them. It
  // goes before reset() returns, so this rank's request for any collective
  // submitted after comes behind it: such a collective runs with the
  // settings.
  void tune_again();

  // Counts the reset that began at `began` and returned `result`, and puts
  // it on the timeline's membership row.
  void record_reset(bool hosts_changed, const status& result, clock::time_point began,
                    int64_t began_us);

  // A job without troupe-run's elastic driver: the next epoch is this one's
  // successor, its members the ranks still alive.
  status reset_numbered(const epoch_run& old);

  status reset_elastic(int64_t old_epoch);

  // A failed reset leaves no epoch serving. It counts as epoch `failed`, so
  // the next reset() advances past it to fresh store keys.
  status failed_reset(const status& why, int64_t failed);

  // Why no call can be served now (a reset in progress or failed); ok
  // otherwise.
  status unavailable_now() const;

  // Once: the supervisor's goodbye fails what is pending, which returns a
  // registry call in progress; then the registry may exit.
  void stop();
};

} // namespace troupe::workers
