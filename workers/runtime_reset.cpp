// runtime::impl's steps that leave a membership epoch and reset into the
// next: numbered (any job with troupe-run's store) or troupe-run's elastic
// plan.
#include "workers/runtime_impl.hpp"

#include <algorithm>
#include <cctype>

#include <spdlog/spdlog.h>

#include "actors/timeline.hpp"
#include "elastic/elastic_plan.hpp"
#include "elastic/membership_epoch.hpp"
#include "workers/membership.hpp"

namespace troupe::workers {

using namespace troupe::actors;
using namespace runtime_steps;

namespace {

// The timeline row of membership changes (RESET_<REASON> spans).
const std::string membership_row = "membership";

std::string upper(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

} // namespace

std::vector<int> runtime::impl::leave_epoch(std::optional<int64_t> next_epoch) {
  auto old = current();
  std::vector<int> alive;
  if (!old.supervisor)
    return alive;
  caf::scoped_actor self{system};
  if (next_epoch) {
    self->request(old.supervisor, std::chrono::seconds(5), reset_atom::value, *next_epoch)
      .receive([&](std::vector<int>& ranks) { alive = std::move(ranks); },
               [](caf::error&) {});
    peer_gone = old.id && static_cast<int>(alive.size()) < old.id->size;
  } else
    self->request(old.supervisor, std::chrono::seconds(5), shutdown_atom::value)
      .receive([](bool) {}, [](caf::error&) {});
  self->send_exit(old.supervisor, caf::exit_reason::user_shutdown);
  if (old.registry)
    self->send_exit(old.registry, caf::exit_reason::user_shutdown);
  std::lock_guard<std::mutex> guard{run_mtx};
  run.supervisor = supervisor_actor{};
  run.registry = process_set_registry_actor{};
  return alive;
}

status runtime::impl::reset() {
  std::lock_guard<std::mutex> serial{change_mtx};
  if (stopped)
    return {status_code::shut_down, "Troupe has been shut down on this rank."};
  const auto old = current();
  if (!store && base.size > 1)
    return {status_code::invalid_argument,
            "reset() needs troupe-run's rendezvous store; under mpirun the membership "
            "belongs to MPI."};
  const auto began = clock::now();
  const auto began_us = timeline_now_us();
  const bool hosts_changed = announced(old.epoch) != host_update::none;
  auto result = base.elastic ? reset_elastic(old.epoch) : reset_numbered(old);
  if (result.ok())
    tune_again();
  record_reset(hosts_changed, result, began, began_us);
  return result;
}

void runtime::impl::tune_again() {
  const auto sets_now = sets->load();
  const auto negotiator = sets_now ? sets_now->negotiator(0) : negotiator_actor{};
  auto in_force = application->recorded();
  if (in_force.empty())
    return;
  if (!negotiator) {
    spdlog::warn("troupe: after the reset, this rank has no global set to restore the "
                 "application's settings on");
    return;
  }
  caf::anon_send(negotiator, restore_atom::value, std::move(in_force));
}

void runtime::impl::record_reset(bool hosts_changed, const status& result, clock::time_point began,
                  int64_t began_us) {
  using metrics::reset_reason;
  using metrics::reset_outcome;
  const auto why = peer_gone       ? reset_reason::peer_lost
                   : hosts_changed ? reset_reason::hosts_updated
                                   : reset_reason::requested;
  const auto how = result.ok()                              ? reset_outcome::ok
                   : result.code() == status_code::removed ? reset_outcome::removed
                                                           : reset_outcome::failed;
  metrics->resets().reset(why, how,
                          std::chrono::duration<double>(clock::now() - began).count());
  if (!timeline)
    return;
  const auto span = "RESET_" + upper(metrics::reset_reason_name(why));
  caf::anon_send(timeline, timeline_atom::value, membership_row, std::string("B"), span,
                 began_us);
  caf::anon_send(timeline, timeline_atom::value, membership_row, std::string("E"), span,
                 timeline_now_us());
  if (how != reset_outcome::ok)
    mark(how == reset_outcome::removed ? "REMOVED" : "RESET_FAILED");
}

status runtime::impl::reset_numbered(const epoch_run& old) {
  const auto deadline = start_deadline(cfg);
  try {
    elastic::epoch_advance next{true, old.epoch + 1};
    if (store)
      next = elastic::advance_epoch(*store, base.job_id, old.epoch);
    unavailable({status_code::reset, "Troupe is resetting to membership epoch " +
                                       std::to_string(next.epoch) + "; retry after reset()."});
    auto alive = leave_epoch(next.epoch);
    // After a failed reset no supervisor is left to ask: the ranks seen
    // alive then are still the best knowledge.
    if (alive.empty())
      alive = last_alive;
    last_alive = alive;
    if (next.epoch != old.epoch + 1)
      return failed_reset(
        {status_code::reset, "this process is at membership epoch " +
                               std::to_string(old.epoch) + " but the job is at " +
                               std::to_string(next.epoch - 1) + ": it missed a reset"},
        next.epoch);
    identity id = *old.id;
    if (store) {
      backends::rank_layout layout;
      auto joined = join_epoch(*store,
                               {base.job_id, next.epoch, next.advanced, alive, old.id->rank,
                                old.id->hostname},
                               deadline, layout);
      if (!joined.ok())
        return failed_reset(joined, next.epoch);
      static_cast<backends::rank_layout&>(id) = layout;
    }
    id.job_id = base.job_id + "/epoch" + std::to_string(next.epoch);
    auto started = bootstrap(next.epoch, id, deadline);
    return started.ok() ? started : failed_reset(started, next.epoch);
  } catch (const std::exception& e) {
    return failed_reset({status_code::peer_lost, e.what()}, current().epoch + 1);
  }
}

status runtime::impl::reset_elastic(int64_t old_epoch) {
  unavailable({status_code::reset, "Troupe is resetting to troupe-run's next membership "
                                   "epoch; retry after reset()."});
  try {
    // The peers this rank lost tell troupe-run whom not to wait for.
    const auto alive = leave_epoch(old_epoch + 1);
    const auto old = current().id;
    auto s = enter_planned(old_epoch + 1, lost_ranks(alive, old ? old->size : 0));
    if (s.ok() || s.code() != status_code::removed)
      return s.ok() ? s : failed_reset(s, current().epoch);
    unavailable(s);
    return s;
  } catch (const std::exception& e) {
    return failed_reset({status_code::peer_lost, e.what()}, current().epoch);
  }
}

status runtime::impl::failed_reset(const status& why, int64_t failed) {
  status s{status_code::reset, "reset() failed: " + why.message() + ". Call reset() again."};
  leave_epoch(std::nullopt);
  unavailable(s);
  std::lock_guard<std::mutex> guard{run_mtx};
  run.epoch = failed;
  return s;
}

} // namespace troupe::workers
