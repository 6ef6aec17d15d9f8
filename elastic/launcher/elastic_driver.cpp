#include "elastic/launcher/elastic_driver.hpp"

#include "elastic/launcher/seat_assignment.hpp"
#include "elastic/launcher/seconds_text.hpp"
#include "elastic/launcher/signals.hpp"
#include "elastic/membership_epoch.hpp"
#include "elastic/store.hpp"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <stdexcept>
#include <sys/wait.h>

namespace troupe::elastic::launcher {

namespace {

// How often the store is read for arrivals at the reset barrier (a local
// round trip each): it bounds how late a barrier opens or closes.
constexpr auto store_poll = std::chrono::milliseconds(20);
// How long the barrier waits for a member its peers lost (see check_barrier).
constexpr auto lost_grace = std::chrono::seconds(1);
// Between SIGTERM and SIGKILL for the other workers of a failed host.
constexpr auto stop_grace = std::chrono::seconds(5);
// How often a failing store is tried again (an etcd leader change: HTTP 503
// for a second or two).
constexpr auto store_retry = std::chrono::milliseconds(250);

} // namespace

elastic_driver::elastic_driver(settings s, std::unique_ptr<discovery_poller> poller,
                               std::optional<cooldown_range> cooldown,
                               job_supervisor& supervisor, store_client& store,
                               line_forwarder::sink report, line_forwarder::sink out,
                               line_forwarder::sink err)
  : s_(std::move(s)), poller_(std::move(poller)), hosts_(cooldown), supervisor_(supervisor),
    store_(store), report_(std::move(report)), out_(std::move(out)), err_(std::move(err)),
    files_(s_.output_dir, s_.np, s_.prefix_timestamp) {
  if (!poller_) {
    hosts_.update(s_.fixed_hosts);
    discovered_ = true;
  }
  slots_deadline_ = clock::now() + s_.elastic_timeout;
}

elastic_driver::~elastic_driver() = default;

job_supervisor::policy elastic_driver::policy() {
  job_supervisor::policy p;
  p.exit = [this](const worker_process& w, int status) { on_exit(w, status); };
  p.tick = [this](clock::time_point now) { return tick(now); };
  // Until the job started, and while a round is open (a reset barrier, or
  // waiting for --min-np): the workers' exits alone do not say how the job
  // ended. Without it, every worker failing at once ended the job with
  // status 0 before the round that reports the failure ran.
  p.hold = [this] { return epoch_ < 0 || barrier_opened_ || slots_deadline_; };
  p.wake_fd = poller_ ? poller_->wake_fd() : -1;
  return p;
}

elastic_driver::clock::time_point elastic_driver::tick(clock::time_point now) {
  try {
    return step(now);
  } catch (const store_error& e) {
    return store_failed(now, e);
  }
}

elastic_driver::clock::time_point elastic_driver::store_failed(clock::time_point now,
                                                               const store_error& e) {
  // Every step that reads or writes the store changes the driver's state
  // only once the store has answered, so the next tick simply tries again.
  if (!store_down_since_) {
    store_down_since_ = now;
    report_("troupe-run: warning: " + std::string(e.what()) + "; retrying for up to " +
            seconds_text(s_.store_outage_limit) + " s (--start-timeout)\n");
  } else if (now - *store_down_since_ >= s_.store_outage_limit) {
    stop_job("the rendezvous store " + store_.where() + " has failed for " +
               seconds_text(now - *store_down_since_) + " s (--start-timeout " +
               seconds_text(s_.store_outage_limit) + " s); last error: " + e.what(),
             1);
    return now + store_poll;
  }
  next_poll_ = now + store_retry;
  return next_poll_;
}

elastic_driver::clock::time_point elastic_driver::step(clock::time_point now) {
  take_discovery();
  for (auto it = kill_at_.begin(); it != kill_at_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    if (auto* w = supervisor_.find(static_cast<int>(it->first)); w && w->running)
      w->signal(SIGKILL);
    it = kill_at_.erase(it);
  }
  // The loop also turns for every line of output: the store is read at
  // most every store_poll.
  if (supervisor_.stopping())
    return now + store_poll;
  if (now < next_poll_)
    return next_poll_;
  next_poll_ = now + store_poll;
  // Not every step reaches the store: while it is down, ask it first.
  if (store_down_since_)
    store_.get(epoch_key(s_.job.job_id));
  // Before the barrier is decided: a member that never connected (failed
  // or left before publishing its endpoint) would otherwise hold its
  // peers in epoch_'s bootstrap for their whole start timeout, which may
  // be past the barrier's deadline.
  if (barrier_opened_)
    tell_barrier(epoch_ + 1, barrier_why_);
  if (epoch_ < 0)
    try_start(now);
  else if (barrier_opened_)
    check_barrier(now);
  else if (slots_deadline_)
    complete_round(now);
  else if (!arrived(epoch_ + 1).empty())
    open_barrier(now, announced_ == epoch_ ? "hosts_updated" : "peer_lost",
                 "a worker is resetting");
  else
    announce_changes(now);
  share_host_states(now);
  // Back only once a whole step went through: a store that answers reads
  // but refuses writes (an etcd out of space) is still down.
  if (store_down_since_) {
    report_("troupe-run: the rendezvous store " + store_.where() + " answers again after " +
            seconds_text(now - *store_down_since_) + " s\n");
    store_down_since_.reset();
  }
  return next_poll_;
}

void elastic_driver::share_host_states(clock::time_point now) {
  const auto states = hosts_.count(now);
  if (shared_hosts_ == states)
    return;
  store_.set(host_states_key(s_.job.job_id), encode_host_states(states));
  shared_hosts_ = states;
  if (observe_.hosts)
    observe_.hosts(states);
}

void elastic_driver::take_discovery() {
  if (!poller_)
    return;
  auto r = poller_->take();
  if (!r)
    return;
  if (!r->ok) {
    if (!discovered_) {
      stop_job(r->error, 1);
      return;
    }
    if (r->error != last_discovery_error_)
      report_("troupe-run: warning: " + r->error + "; keeping the last hosts\n");
    last_discovery_error_ = r->error;
    return;
  }
  last_discovery_error_.clear();
  hosts_.update(r->hosts);
  discovered_ = true;
}

void elastic_driver::try_start(clock::time_point now) {
  auto plan = stored_next_plan();
  if (!plan && discovered_) {
    plan = assign_seats(hosts_.usable(now), {}, s_.max_np);
    if (static_cast<int>(plan->size()) < s_.np)
      plan.reset();
  }
  if (!plan) {
    if (now >= *slots_deadline_)
      stop_job(timeout_message(s_.np), 1);
    return;
  }
  write_plan(*plan, now);
  slots_deadline_.reset();
  adopt(std::move(*plan), now);
}

std::string elastic_driver::timeout_message(int np) const {
  return "Timed out waiting for minimum number of slots to become available. Please check that "
         "you have enough resources to run at least " +
         std::to_string(np) + " Horovod processes. (--elastic-timeout " +
         seconds_text(s_.elastic_timeout) + " s)";
}

void elastic_driver::open_barrier(clock::time_point now, const std::string& reason,
                                  const std::string& why, bool timed) {
  if (slots_deadline_)
    return;
  if (barrier_opened_) {
    // A failure during a barrier a leave opened: the failed worker's peers
    // reset, and the deadline runs from now.
    if (timed && !barrier_deadline_)
      start_deadline(now, why);
    return;
  }
  if (observe_.barrier_opened)
    observe_.barrier_opened(reason);
  barrier_opened_ = now;
  barrier_why_ = why;
  if (timed) {
    start_deadline(now, why);
    return;
  }
  report_("troupe-run: " + why + "; reset barrier of membership epoch " +
          std::to_string(epoch_ + 1) + " open; its deadline (--reset-timeout " +
          seconds_text(s_.reset_timeout) + " s) starts when a member arrives there\n");
}

void elastic_driver::start_deadline(clock::time_point now, const std::string& why) {
  barrier_deadline_ = now + s_.reset_timeout;
  report_("troupe-run: " + why + "; reset barrier of membership epoch " +
          std::to_string(epoch_ + 1) + " open for " + seconds_text(s_.reset_timeout) + " s\n");
}

void elastic_driver::check_barrier(clock::time_point now) {
  const auto got = arrived(epoch_ + 1);
  // A barrier a leave opened has no deadline until a member resets: the
  // others may be finishing their own work (saving a checkpoint), not
  // waiting for peers. Until then only exits close it.
  if (!barrier_deadline_ && !got.empty())
    start_deadline(now, "worker " + name_of(got.begin()->first) + " is resetting");
  // A member an arrived member lost (its connection closed, or it went
  // silent past the heartbeat timeout: frozen, partitioned) is not waited
  // for past a short grace: a live one learns of the reset from its peers
  // within milliseconds and arrives.
  // (The deadline began running --reset-timeout before it falls.)
  const bool grace_over =
    barrier_deadline_ && now >= *barrier_deadline_ - s_.reset_timeout + lost_grace;
  auto lost_by_any = [&](int rank) {
    return std::any_of(got.begin(), got.end(), [rank](const auto& a) {
      const auto& lost = a.second.lost;
      return std::find(lost.begin(), lost.end(), rank) != lost.end();
    });
  };
  bool waiting = false;
  for (size_t rank = 0; rank < plan_.size(); ++rank) {
    const auto id = plan_[rank].worker_id;
    if (members_.at(id).departed || got.count(id) > 0)
      continue;
    if (grace_over && lost_by_any(static_cast<int>(rank)))
      fail_worker(id, "was lost by its peers and did not arrive at the reset barrier", 1, now);
    else if (barrier_deadline_ && now >= *barrier_deadline_)
      fail_worker(id,
                  "did not arrive at the reset barrier within " +
                    seconds_text(s_.reset_timeout) + " s (--reset-timeout)",
                  1, now);
    else
      waiting = true;
  }
  if (waiting)
    return;
  // It closes the barrier once the round is decided (a store failure while
  // publishing leaves it open, to be decided again).
  complete_round(now);
}

void elastic_driver::close_barrier(clock::time_point now) {
  if (!barrier_opened_)
    return;
  if (observe_.barrier_closed)
    observe_.barrier_closed(now - *barrier_opened_);
  barrier_opened_.reset();
  barrier_deadline_.reset();
}

void elastic_driver::complete_round(clock::time_point now) {
  auto plan = stored_next_plan();
  // Taken as it is, unless none of its members from this epoch is alive
  // any more: its newcomers would have nobody to sync state from.
  if (plan && !carries_a_survivor(*plan)) {
    end_without_survivors();
    close_barrier(now);
    return;
  }
  if (!plan)
    plan = next_plan(now);
  if (!plan) {
    close_barrier(now);
    return;
  }
  write_plan(*plan, now);
  // From here a failure (a worker that cannot be spawned) opens the next
  // epoch's barrier.
  close_barrier(now);
  slots_deadline_.reset();
  ++resets_;
  adopt(std::move(*plan), now);
}

std::optional<membership_plan> elastic_driver::next_plan(clock::time_point now) {
  const auto left = survivors();
  if (left.empty()) {
    end_without_survivors();
    return std::nullopt;
  }
  if (s_.reset_limit && resets_ >= *s_.reset_limit) {
    stop_job("Horovod was shutdown because number of resets during elastic job exceeded "
             "limit: " + std::to_string(*s_.reset_limit) + " (--reset-limit)",
             1);
    return std::nullopt;
  }
  if (hosts_.all_blacklisted_for_good()) {
    stop_job("every host of the job is blacklisted (pass --blacklist-cooldown-range to let "
             "failed hosts return)",
             1);
    return std::nullopt;
  }
  auto plan = assign_seats(hosts_.usable(now), left, s_.max_np);
  if (std::none_of(plan.begin(), plan.end(),
                   [](const auto& m) { return m.worker_id != new_seat; })) {
    stop_job("No hosts from previous set remaining, unable to broadcast state.", 1);
    return std::nullopt;
  }
  if (static_cast<int>(plan.size()) < s_.min_np) {
    if (!slots_deadline_) {
      slots_deadline_ = now + s_.elastic_timeout;
      report_("troupe-run: " + std::to_string(plan.size()) + " slot(s) usable, below --min-np " +
              std::to_string(s_.min_np) + "; waiting up to " + seconds_text(s_.elastic_timeout) +
              " s\n");
    } else if (now >= *slots_deadline_) {
      stop_job(timeout_message(s_.min_np), 1);
    }
    return std::nullopt;
  }
  return plan;
}

void elastic_driver::announce_changes(clock::time_point now) {
  if (announced_ == epoch_)
    return;
  if (!settled_) {
    const auto got = arrived(epoch_);
    settled_ = std::all_of(plan_.begin(), plan_.end(),
                           [&got](const auto& m) { return got.count(m.worker_id) > 0; });
    if (!settled_)
      return;
  }
  const auto change = compare_plans(plan_, assign_seats(hosts_.usable(now), plan_, s_.max_np));
  if (change == host_change::none)
    return;
  const notice n{epoch_, change};
  store_.set(notice_key(s_.job.job_id), encode_notice(n));
  announced_ = epoch_;
  report_("troupe-run: hosts changed during membership epoch " + std::to_string(epoch_) + " (" +
          encode_notice(n).substr(encode_notice(n).find(' ') + 1) +
          "); workers reset at their next commit\n");
}

void elastic_driver::spawn(const plan_member& seat, const rank_slot& slot, int size,
                           clock::time_point now) {
  const bool here = is_local_host(seat.host, s_.own_hostname);
  auto job = s_.job;
  job.size = size;
  auto placed = slot;
  placed.machine_local_rank = machine_slots_.claim(seat.worker_id, here ? "" : seat.host);
  auto vars = rank_variables(placed, job);
  vars.insert(vars.end(), {{"TROUPE_ELASTIC", "1"},
                           {"HOROVOD_ELASTIC", "1"},
                           {"TROUPE_WORKER_ID", std::to_string(seat.worker_id)},
                           {"TROUPE_SPAWN_HOST", seat.host}});
  if (job.nccl_host_id_per_rank)
    vars.push_back(nccl_host_id(job, seat.worker_id));
  auto env = merge_environment(s_.parent_env, vars);
  std::vector<std::string> argv = s_.command;
  std::string input;
  if (!s_.spawn_command.empty()) {
    // The hook gets the worker's command as its arguments ("$@").
    argv = {"/bin/sh", "-c", s_.spawn_command + " \"$@\"", "troupe-spawn"};
    argv.insert(argv.end(), s_.command.begin(), s_.command.end());
  } else if (!here) {
    // ssh gets troupe-run's environment; the worker's goes on its command
    // line, the secret through its stdin.
    argv = ssh_command(seat.host, s_.ssh, s_.cwd, env, s_.command);
    env = s_.parent_env;
    input = s_.secret;
  }
  const auto id = static_cast<int>(seat.worker_id);
  try {
    // Files by worker id, the tag of its lines: a rank's number moves
    // between workers at a reset, and a new worker must not truncate an
    // old one's file.
    auto worker = spawn_worker(id, argv, env, files_.tee(id, "stdout", out_),
                               files_.tee(id, "stderr", err_), input);
    worker.on_this_host = here && s_.spawn_command.empty();
    supervisor_.add(std::move(worker));
    if (observe_.spawned)
      observe_.spawned();
  } catch (const spawn_error& e) {
    machine_slots_.release(seat.worker_id);
    fail_worker(seat.worker_id, e.what(), 127, now);
  } catch (const std::runtime_error& e) {  // its output files
    machine_slots_.release(seat.worker_id);
    fail_worker(seat.worker_id, e.what(), 1, now);
  }
}

void elastic_driver::on_exit(const worker_process& w, int status) {
  const auto now = clock::now();
  machine_slots_.release(w.rank);
  auto it = members_.find(w.rank);
  if (it == members_.end() || it->second.departed)
    return;  // removed from the plan, or already counted
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    it->second.departed = true;
    report_("troupe-run: worker " + name_of(w.rank) + " left the job (exit status 0)\n");
    // Not a deadline for the others: a worker that exits 0 may simply be
    // done, and its peers still finishing (Horovod waits for them all).
    open_barrier(now, "leave", "a worker left", false);
    return;
  }
  fail_worker(w.rank,
              WIFSIGNALED(status) ? "was killed by signal " + signal_name(WTERMSIG(status))
                                  : "exited with status " + std::to_string(WEXITSTATUS(status)),
              WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status), now);
}

void elastic_driver::fail_worker(int64_t id, const std::string& why, int code,
                                 clock::time_point now) {
  auto& failed = members_.at(id);
  if (failed.departed)
    return;
  failed.departed = true;
  if (!failure_code_)
    failure_code_ = code;
  report_("troupe-run: worker " + name_of(id) + " " + why + "; host " + failed.host +
          " is blacklisted\n");
  hosts_.blacklist(failed.host, now);
  if (auto* w = supervisor_.find(static_cast<int>(id)); w && w->running)
    w->signal(SIGKILL);
  // The whole host is out: its other workers stop too.
  for (auto& [other, m] : members_) {
    if (m.departed || m.host != failed.host)
      continue;
    m.departed = true;
    if (auto* w = supervisor_.find(static_cast<int>(other)); w && w->running) {
      w->signal(SIGTERM);
      kill_at_.emplace_back(other, now + stop_grace);
    }
  }
  open_barrier(now, "failure", "a worker failed");
}

void elastic_driver::tell_barrier(int64_t epoch, const std::string& why) {
  if (epoch <= barrier_told_)
    return;
  store_.set(barrier_key(s_.job.job_id, epoch), why);
  barrier_told_ = epoch;
}

void elastic_driver::stop_job(const std::string& why, int code) {
  report_("troupe-run: error: " + why + "\n");
  supervisor_.abort(code);
}

std::map<int64_t, arrival> elastic_driver::arrived(int64_t epoch) {
  const auto prefix = arrive_prefix(s_.job.job_id, epoch);
  std::map<int64_t, arrival> out;
  for (const auto& [key, value] : store_.list_values(prefix)) {
    int64_t id = -1;
    const auto* first = key.data() + prefix.size();
    const auto* last = key.data() + key.size();
    auto [end, ec] = std::from_chars(first, last, id);
    // Only current members count; anything else under the prefix is not ours.
    if (ec == std::errc{} && end == last && members_.count(id) > 0)
      out.emplace(id, decode_arrival(value));
  }
  return out;
}

std::string elastic_driver::name_of(int64_t id) const {
  auto it = std::find_if(plan_.begin(), plan_.end(),
                         [id](const auto& m) { return m.worker_id == id; });
  if (it == plan_.end())
    return std::to_string(id);
  return std::to_string(id) + " (rank " + std::to_string(it - plan_.begin()) + " of epoch " +
         std::to_string(epoch_) + ", host " + it->host + ")";
}

} // namespace troupe::elastic::launcher
