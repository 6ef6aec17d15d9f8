#include "elastic/launcher/job_supervisor.hpp"

#include "elastic/launcher/signals.hpp"
#include "ipc/shm_segment.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

namespace troupe::elastic::launcher {

namespace {

// After the last worker exited, output still held open by a process it left
// behind is not waited for longer than this.
constexpr std::chrono::milliseconds drain_limit{1000};

int exit_code_of(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

} // namespace

job_supervisor::job_supervisor(int signal_fd, limits lim,
                               line_forwarder::sink report)
  : signal_fd_(signal_fd), limits_(lim), report_(std::move(report)) {
  if (limits_.timeout)
    job_deadline_ = clock::now() + *limits_.timeout;
}

void job_supervisor::add(worker_process w) {
  workers_.push_back(std::move(w));
}

worker_process* job_supervisor::find(int rank) {
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [rank](const auto& w) { return w.rank == rank; });
  return it == workers_.end() ? nullptr : &*it;
}

void job_supervisor::abort(int exit_code) {
  if (!exit_code_)
    exit_code_ = exit_code;
  stop(SIGTERM);
}

int job_supervisor::run() {
  std::vector<pollfd> fds;
  std::vector<worker_process*> owners;
  // SIGCHLD of a worker that exited before the loop started is pending on
  // the signalfd, so nothing is missed here.
  for (;;) {
    auto now = clock::now();
    tick_deadline_.reset();
    if (policy_.tick && !stopping_)
      tick_deadline_ = policy_.tick(now);
    if (finished(now))
      break;
    fds.assign(1, pollfd{signal_fd_, POLLIN, 0});
    owners.assign(1, nullptr);
    if (policy_.wake_fd >= 0) {
      fds.push_back({policy_.wake_fd, POLLIN, 0});
      owners.push_back(nullptr);
    }
    for (auto& w : workers_) {
      for (auto* fd : {&w.out, &w.err}) {
        if (*fd) {
          fds.push_back({fd->get(), POLLIN, 0});
          owners.push_back(&w);
        }
      }
    }
    int n = ::poll(fds.data(), fds.size(), poll_timeout(now));
    if (n < 0 && errno != EINTR)
      break;
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents != 0 && owners[i])
        owners[i]->drain();
    if (fds[0].revents != 0)
      on_signals();
    on_deadlines();
  }
  // Output held open past the drain limit is dropped with its pipes.
  for (auto& w : workers_) {
    w.out_lines.finish();
    w.err_lines.finish();
  }
  return exit_code_.value_or(0);
}

void job_supervisor::on_signals() {
  signalfd_siginfo info;
  bool child = false;
  while (::read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
    auto sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      child = true;
    } else if (stopping_) {
      // A second interrupt means "now": skip the rest of the grace period.
      kill_deadline_ = clock::now();
    } else {
      report_("troupe-run: received " + signal_name(sig)
              + ", stopping workers\n");
      if (!exit_code_)
        exit_code_ = 128 + sig;
      stop(sig);
    }
  }
  if (child)
    reap();
}

void job_supervisor::reap() {
  // Only our workers: other children (a discovery script) are waited for
  // by whoever started them. By index: an exit policy may add workers.
  for (size_t i = 0; i < workers_.size(); ++i) {
    int status = 0;
    if (workers_[i].running && ::waitpid(workers_[i].pid, &status, WNOHANG) == workers_[i].pid)
      on_exit(workers_[i], status);
  }
}

void job_supervisor::on_exit(worker_process& w, int status) {
  w.running = false;
  // A rank killed between creating a shared segment and its peers opening
  // it leaves the name behind (it unlinks it only once they have).
  if (w.on_this_host)
    for (const auto& name : ipc::remove_segments_of(w.pid))
      report_("troupe-run: removed shared-memory segment " + name + " that " +
              worker_name(w.rank) + " (pid " + std::to_string(w.pid) + ") left behind\n");
  // Forward what it wrote before its exit is reported.
  w.drain();
  bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  if (observe_exit_)
    observe_exit_(failed);
  if (policy_.exit) {
    policy_.exit(w, status);
  } else if (failed && !stopping_) {
    if (WIFSIGNALED(status))
      report_("troupe-run: " + worker_name(w.rank) + " killed by signal "
              + signal_name(WTERMSIG(status)) + "\n");
    else
      report_("troupe-run: " + worker_name(w.rank) + " exited with status "
              + std::to_string(WEXITSTATUS(status)) + "\n");
    exit_code_ = exit_code_of(status);
    stop(SIGTERM);
  }
  bool all_done = std::none_of(workers_.begin(), workers_.end(),
                               [](const auto& x) { return x.running; });
  if (all_done)
    drain_deadline_ = clock::now() + drain_limit;
}

void job_supervisor::stop(int sig) {
  stopping_ = true;
  for (const auto& w : workers_)
    if (w.running)
      w.signal(sig);
  if (!kill_deadline_)
    kill_deadline_ = clock::now() + limits_.grace;
}

void job_supervisor::on_deadlines() {
  auto now = clock::now();
  if (job_deadline_ && now >= *job_deadline_ && !stopping_) {
    job_deadline_.reset();
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g",
                  static_cast<double>(limits_.timeout->count()) / 1000.0);
    report_("troupe-run: job exceeded its time limit of "
            + std::string(seconds) + " s, stopping workers\n");
    abort(124);
  }
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    for (const auto& w : workers_)
      if (w.running)
        w.signal(SIGKILL);
  }
}

bool job_supervisor::finished(clock::time_point now) const {
  if (!stopping_ && policy_.hold && policy_.hold())
    return false;
  if (std::any_of(workers_.begin(), workers_.end(),
                  [](const auto& w) { return w.running; }))
    return false;
  bool pipes_open = std::any_of(workers_.begin(), workers_.end(),
                                [](const auto& w) { return w.out || w.err; });
  return !pipes_open || (drain_deadline_ && now >= *drain_deadline_);
}

int job_supervisor::poll_timeout(clock::time_point now) const {
  std::optional<clock::time_point> next;
  for (const auto& d : {job_deadline_, kill_deadline_, drain_deadline_, tick_deadline_})
    if (d && (!next || *d < *next))
      next = d;
  if (!next)
    return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - now);
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 1 << 30));
}

} // namespace troupe::elastic::launcher
