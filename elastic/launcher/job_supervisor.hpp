#pragma once

#include "elastic/launcher/worker_process.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace troupe::elastic::launcher {

/// Runs a job to its end: forwards worker output, reaps workers, and stops
/// the whole job on the first failure (unless a policy decides), on
/// SIGINT/SIGTERM/SIGHUP, or when the job's time limit passes (SIGTERM to
/// every worker group, SIGKILL after a grace period).
class job_supervisor {
public:
  using clock = std::chrono::steady_clock;

  struct limits {
    /// Whole-job limit; exceeding it stops the job with exit code 124.
    std::optional<std::chrono::milliseconds> timeout;
    /// Time between SIGTERM and SIGKILL when stopping.
    std::chrono::milliseconds grace{3000};
  };

  /// `signal_fd` comes from open_signal_fd(); `report` prints one message
  /// line of troupe-run itself (to stderr).
  job_supervisor(int signal_fd, limits lim, line_forwarder::sink report);

  void add(worker_process w);

  /// Called for every worker whose exit was reaped (for metrics).
  using exit_observer = std::function<void(bool failed)>;
  void observe_exits(exit_observer f) {
    observe_exit_ = std::move(f);
  }

  /// Stops the workers started so far, e.g. when a later one failed to
  /// spawn; run() then returns `exit_code`.
  void abort(int exit_code);

  /// What an elastic driver plugs in instead of the fixed job's rules.
  struct policy {
    /// Decides about every reaped worker instead of "the first failure
    /// stops the job" (the exit observer still sees it).
    std::function<void(const worker_process&, int status)> exit;
    /// Called on every turn of the loop; returns when it wants the next
    /// call at the latest.
    std::function<clock::time_point(clock::time_point now)> tick;
    /// While true, the job goes on even with no worker running.
    std::function<bool()> hold;
    /// Readable when tick should run now (drained by the policy); -1: none.
    int wake_fd = -1;
  };
  void set_policy(policy p) {
    policy_ = std::move(p);
  }

  /// The worker tagged `rank`, or null. Valid until the next add().
  worker_process* find(int rank);

  /// True once the job is being stopped (signal, time limit, abort()).
  bool stopping() const {
    return stopping_;
  }

  /// Blocks until every worker has exited and its output is forwarded.
  /// Returns troupe-run's exit code: 0 when all exited 0, else the first
  /// failing worker's code (128 + signal number for a signal), 124 on
  /// timeout, 128 + signal number when troupe-run was interrupted.
  int run();

private:
  void on_signals();
  void reap();
  void on_exit(worker_process& w, int status);
  void stop(int sig);
  void on_deadlines();
  bool finished(clock::time_point now) const;
  int poll_timeout(clock::time_point now) const;

  int signal_fd_;
  limits limits_;
  line_forwarder::sink report_;
  std::vector<worker_process> workers_;
  exit_observer observe_exit_;
  policy policy_;
  std::optional<int> exit_code_;
  bool stopping_ = false;
  std::optional<clock::time_point> job_deadline_;
  std::optional<clock::time_point> kill_deadline_;
  std::optional<clock::time_point> drain_deadline_;
  std::optional<clock::time_point> tick_deadline_;
};

} // namespace troupe::elastic::launcher
