#pragma once

#include "elastic/elastic_plan.hpp"
#include "elastic/launcher/discovery.hpp"
#include "elastic/launcher/host_registry.hpp"
#include "elastic/launcher/job_supervisor.hpp"
#include "elastic/launcher/machine_slots.hpp"
#include "elastic/launcher/options.hpp"
#include "elastic/launcher/output_files.hpp"
#include "elastic/launcher/ssh_command.hpp"
#include "elastic/launcher/worker_env.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace troupe::elastic {
class store_client;
class store_error;
}

namespace troupe::elastic::launcher {

/// troupe-run's elastic mode: plans every membership epoch of the job
/// (elastic_plan.hpp) and keeps the workers to the plan. It runs inside
/// job_supervisor's loop as its policy:
///
/// - Start: once --np slots are usable (discovery or -H, waiting up to
///   the elastic timeout), epoch 0 gets every usable slot up to --max-np.
/// - A member that exits non-zero blacklists its host (the host's other
///   members are stopped); one that exits 0 leaves. Either opens the reset
///   barrier of the next epoch, as does a member arriving there on its own
///   (it lost a peer). Every member must arrive, exit or be failed: one that
///   has not arrived by --reset-timeout, or 1 s after the deadline started
///   when a peer lost it (heartbeat), is killed and failed. The deadline
///   starts when the barrier opens, except for a leave: then only once a
///   member arrives (or one fails), so that members still finishing their
///   own work after a peer exited 0 are not killed.
/// - Then: the reset limit, the usable hosts and --min-np (waiting up to
///   the elastic timeout) decide; the next plan keeps the survivors, adds
///   new workers for free slots, and is published; new workers start. A
///   plan an earlier try stored (its reply lost) is taken as it is.
/// - A change of hosts while an epoch runs settled is announced to the
///   workers (J/notice); they reset at their next commit.
/// - Hosts by state go to the store (J/hosts) whenever a count changes,
///   for the ranks' metrics.
/// - The job ends when no member is left: exit 0 when the last
///   membership's members all exited 0.
class elastic_driver {
public:
  using clock = std::chrono::steady_clock;

  struct settings {
    int np = 0;
    int min_np = 0;
    int max_np = 0;
    std::optional<int> reset_limit;
    clock::duration elastic_timeout;
    clock::duration reset_timeout;
    /// How long the store may fail every request (e.g. an etcd without a
    /// leader) before the job stops; troupe-run passes --start-timeout.
    clock::duration store_outage_limit = std::chrono::seconds(30);
    /// Fixed hosts (-H / --hostfile) when there is no discovery script.
    std::vector<host_spec> fixed_hosts;
    std::string spawn_command;
    /// Without a spawn command, workers on other hosts start over ssh, in
    /// `cwd`, reading the job's `secret` from their stdin.
    ssh_options ssh;
    std::string cwd;
    std::string secret;
    std::vector<std::string> command;
    std::vector<std::string> parent_env;
    job_env job;
    std::string own_hostname;
    /// --output-filename: each worker's lines also go to
    /// DIR/rank.<worker id>/stdout and stderr (output_files); empty: none.
    std::string output_dir;
    /// --prefix-output-with-timestamp (output_files).
    bool prefix_timestamp = false;
  };

  /// Starts polling discovery (when `poller` is given) at once.
  elastic_driver(settings s, std::unique_ptr<discovery_poller> poller,
                 std::optional<cooldown_range> cooldown, job_supervisor& supervisor,
                 store_client& store, line_forwarder::sink report,
                 line_forwarder::sink out, line_forwarder::sink err);
  ~elastic_driver();

  /// What job_supervisor calls.
  job_supervisor::policy policy();

  /// What the driver reports (for metrics); every member may stay empty.
  struct observer {
    std::function<void()> spawned;
    std::function<void(int64_t epoch, int members)> published;
    /// failure, leave, peer_lost or hosts_updated.
    std::function<void(const std::string& reason)> barrier_opened;
    std::function<void(clock::duration)> barrier_closed;
    std::function<void(const host_registry::counts&)> hosts;
  };
  void observe(observer o) {
    observe_ = std::move(o);
  }

private:
  struct member {
    std::string host;
    bool departed = false;
  };

  /// step(), but a store_error is retried on later ticks (warned about
  /// once per outage) until the store has failed for store_outage_limit.
  /// An outage ends only when a whole step goes through, not at the first
  /// request the store answers.
  clock::time_point tick(clock::time_point now);
  clock::time_point step(clock::time_point now);
  clock::time_point store_failed(clock::time_point now, const store_error& e);
  void on_exit(const worker_process& w, int status);
  void take_discovery();
  void try_start(clock::time_point now);
  void check_barrier(clock::time_point now);
  void complete_round(clock::time_point now);
  /// The plan an earlier try stored for epoch_ + 1 (its reply lost), if
  /// any: it stands, whatever the hosts did since, for workers may have
  /// joined its epoch.
  std::optional<membership_plan> stored_next_plan();
  /// The next epoch's plan (new seats as new_seat), or nothing when the
  /// round ends otherwise: the job stops, or waits for --min-np slots.
  std::optional<membership_plan> next_plan(clock::time_point now);
  /// Whether a member of `plan` from the current epoch is still alive.
  bool carries_a_survivor(const membership_plan& plan) const;
  /// Ends the job once nobody of the epoch is left, failed if one failed.
  void end_without_survivors();
  void close_barrier(clock::time_point now);
  void announce_changes(clock::time_point now);
  /// Opens the reset barrier of epoch_ + 1; `timed`: its deadline starts
  /// now, else when a member arrives there (or a worker fails).
  void open_barrier(clock::time_point now, const std::string& reason, const std::string& why,
                    bool timed = true);
  void start_deadline(clock::time_point now, const std::string& why);
  /// Publishes `plan` as epoch_ + 1 in the store, giving new seats their
  /// worker ids; a plan already stored for that epoch (by a try whose reply
  /// was lost) is never replaced: `plan` becomes that one. Changes nothing
  /// else but next_worker_id_, once published, so that a store_error leaves
  /// the driver as it was.
  void write_plan(membership_plan& plan, clock::time_point now);
  /// Makes the written plan the driver's and starts its new workers.
  void adopt(membership_plan plan, clock::time_point now);
  /// Writes the hosts by state to the store (and the observer) when they
  /// changed since last written.
  void share_host_states(clock::time_point now);
  void spawn(const plan_member& seat, const rank_slot& slot, int size, clock::time_point now);
  void fail_worker(int64_t id, const std::string& why, int code, clock::time_point now);
  void stop_job(const std::string& why, int code);
  /// Writes J/barrier/<epoch> (once): ranks still connecting for epoch - 1
  /// stop waiting for a peer that will not come.
  void tell_barrier(int64_t epoch, const std::string& why);
  /// Who arrived at the reset barrier of `epoch`, by worker id.
  std::map<int64_t, arrival> arrived(int64_t epoch);
  membership_plan survivors() const;
  std::string name_of(int64_t id) const;
  std::string timeout_message(int np) const;

  settings s_;
  std::unique_ptr<discovery_poller> poller_;
  observer observe_;
  host_registry hosts_;
  job_supervisor& supervisor_;
  store_client& store_;
  line_forwarder::sink report_, out_, err_;
  output_files files_;

  bool discovered_ = false;       // a discovery run has succeeded
  std::string last_discovery_error_;  // reported once until it changes
  int64_t epoch_ = -1;            // the newest published epoch; -1: not started
  membership_plan plan_;          // its members, rank order
  std::map<int64_t, member> members_;
  machine_slots machine_slots_;   // of workers whose process runs
  int64_t next_worker_id_ = 0;
  int resets_ = 0;
  std::optional<int> failure_code_;  // first failure among the current members
  std::optional<clock::time_point> barrier_opened_;  // the barrier of epoch_ + 1 is open
  // None: waits for exits/arrivals; else set --reset-timeout after it began running.
  std::optional<clock::time_point> barrier_deadline_;
  std::optional<clock::time_point> slots_deadline_;    // waiting for --min-np slots
  std::string barrier_why_;                            // why the barrier opened
  int64_t barrier_told_ = 0;                           // newest J/barrier/<E> written
  int64_t announced_ = -1;                             // epoch whose change was announced
  bool settled_ = false;                               // every member arrived at epoch_
  std::vector<std::pair<int64_t, clock::time_point>> kill_at_;  // leftovers to SIGKILL
  clock::time_point next_poll_{};                               // next read of the store
  std::optional<host_states> shared_hosts_;                     // last written to J/hosts
  std::optional<clock::time_point> store_down_since_;  // the store has failed since
};

} // namespace troupe::elastic::launcher
