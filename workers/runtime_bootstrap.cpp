// runtime::impl's steps that bring a membership epoch up: the control
// connections to the peers, the global process set, and an elastic
// process's seat in troupe-run's plan.
#include "workers/runtime_impl.hpp"
#include "workers/runtime_bootstrap.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <spdlog/spdlog.h>

#include "backends/thread_affinity.hpp"
#include "control/control_links.hpp"
#include "elastic/elastic_plan.hpp"
#include "elastic/membership_epoch.hpp"
#include "elastic/store_exchange.hpp"
#include "workers/elastic_join.hpp"
#include "workers/supervisor.hpp"
#include "workers/wait_spin.hpp"

namespace troupe::workers {

using namespace troupe::actors;
using namespace runtime_steps;

status runtime::impl::connect_peers(epoch_run& next, const identity& id, clock::time_point deadline) {
  caf::anon_send(directory, enter_atom::value, next.epoch, next.supervisor);
  if (id.size == 1)
    return {};
  const control::published_endpoint own{id.listen_host + ":" + std::to_string(directory_port),
                                        cfg.control_fanout, id.hostname};
  auto key = [&id](int rank) { return id.job_id + "/endpoint/" + std::to_string(rank); };
  std::vector<std::string> all;
  if (store) {
    // First writer wins: a second process claiming this rank cannot
    // redirect the peers.
    auto claim = store->compare_set(key(id.rank), std::nullopt, own.encode());
    if (!claim.swapped)
      return {status_code::invalid_argument,
              "rank " + std::to_string(id.rank) + "'s endpoint is already registered as " +
                claim.current.value_or("?") + ": two processes started as rank " +
                std::to_string(id.rank) + " of job " + id.job_id};
    // Then one listing of every endpoint once all ranks published
    // theirs, not one wait per peer (O(N^2) through the store's thread).
    // In elastic mode, troupe-run opening the next epoch's reset barrier
    // means a missing rank will not come (it failed or left, or gave this
    // epoch up): waiting out the start timeout could overrun the barrier's
    // deadline (--reset-timeout), and troupe-run would fail this worker.
    std::optional<std::string> abandon;
    if (base.elastic)
      abandon = elastic::barrier_key(base.job_id, next.epoch + 1);
    try {
      all = elastic::gather_published(
        *store, id.job_id + "/endpoint/", id.job_id + "/endpoints-published/", id.size,
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()), abandon);
    } catch (const elastic::exchange_abandoned& e) {
      return {status_code::reset, "membership epoch " + std::to_string(next.epoch) +
                                    " is given up before every rank connected: " + e.what()};
    }
  } else {
    all = launch->allgather(own.encode());
  }
  std::vector<control::published_endpoint> endpoints;
  std::vector<int32_t> fanouts;
  std::vector<std::string> hosts;
  for (const auto& text : all) {
    if (text.rfind(start_failed_mark, 0) == 0)
      return {status_code::peer_lost,
              "rank " + std::to_string(endpoints.size()) + " could not start: " +
                text.substr(std::strlen(start_failed_mark))};
    try {
      endpoints.push_back(control::published_endpoint::decode(text));
    } catch (const std::exception& e) {
      return {status_code::invalid_argument,
              "rank " + std::to_string(endpoints.size()) + " published a malformed endpoint: " +
                e.what()};
    }
    fanouts.push_back(endpoints.back().fanout);
    hosts.push_back(endpoints.back().hostname);
  }
  const auto links = control::control_links::plan(fanouts, hosts);
  const auto differs = std::find_if(fanouts.begin(), fanouts.end(),
                                    [&](int32_t f) { return f != fanouts.front(); });
  if (differs != fanouts.end() && (id.rank == 0 || cfg.control_fanout != fanouts.front()))
    spdlog::warn("troupe rank {}: TROUPE_CONTROL_FANOUT is {} on rank 0 but {} on rank {}: "
                 "every rank connects to every other (a full mesh of control connections)",
                 id.rank, fanouts.front(), *differs, differs - fanouts.begin());
  next.dialer = std::make_shared<const control_dialer>(system, connections, id.rank,
                                                       std::move(endpoints), links);
  // Mesh: nearest lower rank first. Had every rank started with rank 0,
  // rank 0's one network thread would take N - 1 handshakes at once (48
  // ranks on this 2-core host: every one timed out, and the retries piled
  // up).
  for (int peer : links.dials(id.rank)) {
    const auto& peer_address = next.dialer->endpoint(peer).address;
    // After the first epoch this is the middleman's cached handle.
    caf::actor remote;
    if (auto dialled = next.dialer->dial(peer, deadline, remote); !dialled.ok())
      return dialled;
    supervisor_actor supervisor;
    status found;
    caf::scoped_actor self{system};
    self->request(remote, deadline - clock::now(), lookup_atom::value, next.epoch)
      .receive([&](supervisor_actor& a) { supervisor = std::move(a); },
               [&](caf::error& err) {
                 found = {status_code::timeout,
                          "rank " + std::to_string(peer) + " at " + peer_address +
                            " did not enter membership epoch " + std::to_string(next.epoch) +
                            " before the start timeout: " + system.render(err)};
               });
    if (!found.ok())
      return found;
    if (!supervisor)
      return {status_code::reset, "rank " + std::to_string(peer) + " at " + peer_address +
                                    " has moved past membership epoch " +
                                    std::to_string(next.epoch)};
    caf::anon_send(supervisor, hello_atom::value, static_cast<int32_t>(id.rank),
                   peer_actor{next.supervisor}, own.address);
    caf::anon_send(next.supervisor, hello_atom::value, static_cast<int32_t>(peer),
                   peer_actor{supervisor}, peer_address);
  }
  status result{status_code::timeout,
                "not every neighbour in the control connections said hello before the start "
                "timeout (TROUPE_START_TIMEOUT)"};
  caf::scoped_actor self{system};
  self->request(next.supervisor, deadline - clock::now(), peers_atom::value, links.parents())
    .receive([&](bool) {
               result = {};
               const auto held = links.neighbours(id.rank).size();
               metrics->control_links(held);
               spdlog::info("troupe rank {}: {} control connection(s) ({})", id.rank, held,
                            links.mesh() ? "a full mesh"
                                         : "the control tree of fanout " +
                                             std::to_string(fanouts.front()));
             },
             [&](caf::error& err) { result = {status_code::timeout, result.message() +
                                                                    ": " + system.render(err)}; });
  return result;
}

status runtime::impl::start_group(const epoch_run& next, const identity& id, clock::time_point deadline,
                   set_entrance& entrance) {
  status result;
  caf::scoped_actor self{system};
  std::vector<int> everyone(static_cast<size_t>(id.size));
  std::iota(everyone.begin(), everyone.end(), 0);
  self
    ->request(next.supervisor, deadline - clock::now(), start_atom::value, uint32_t{0},
              everyone, uint64_t{0})
    .receive(
      [&](status& s, set_entrance& started) {
        result = std::move(s);
        entrance = std::move(started);
      },
      [&](caf::error& err) {
        result = {status_code::timeout,
                  "the global process set did not start: " + system.render(err)};
      });
  return result;
}

status runtime::impl::bootstrap(int64_t epoch, const identity& id, clock::time_point deadline) {
  const auto began = clock::now();
  epoch_run next;
  next.epoch = epoch;
  next.id = std::make_shared<const identity>(id);
  next.supervisor =
    spawn_supervisor(system,
                     supervisor_args{id, cfg, rendezvous_store, metrics, epoch, timeline,
                                     application});
  status result;
  try {
    result = connect_peers(next, id, deadline);
    set_entrance global_set;
    if (result.ok())
      result = start_group(next, id, deadline, global_set);
    if (result.ok()) {
      auto first = std::make_shared<process_set_snapshot>(id.size, id.rank);
      first->epoch = epoch;
      first->entrances.emplace(0, std::move(global_set));
      sets->store(std::move(first));
      next.registry =
        spawn_process_set_registry(system, next.supervisor, id, cfg, sets, next.dialer);
      metrics->position({id.rank, id.size, id.local_rank}, epoch);
      const int cpus = backends::usable_cpus();
      const auto spin = wait_spin(cfg.wait_spin_us, id.local_size, cpus);
      detail::handle_state::set_spin(spin);
      spdlog::info("troupe rank {}: a wait for a collective yields {} us before it sleeps "
                   "({} CPUs for {} rank(s) on this host; TROUPE_WAIT_SPIN_US={})",
                   id.rank, spin.count(), cpus, id.local_size,
                   cfg.wait_spin_us < 0 ? std::string("auto") : std::to_string(cfg.wait_spin_us));
      metrics->resets().rendezvous(std::chrono::duration<double>(clock::now() - began).count());
      mark("MEMBERSHIP_EPOCH_" + std::to_string(epoch));
    }
  } catch (const std::exception& e) {
    result = {status_code::peer_lost, std::string("bootstrap failed: ") + e.what()};
  }
  std::lock_guard<std::mutex> guard{run_mtx};
  run = std::move(next);
  return result;
}

status runtime::impl::enter_planned(int64_t first, std::vector<int> lost) {
  for (int own_failures = 0;;) {
    // Each plan is awaited for as long as troupe-run may take to publish
    // it: its reset barrier, then waiting for --min-np slots.
    const auto plan_deadline =
      clock::now() + seconds(cfg.elastic_timeout_seconds + cfg.reset_timeout_seconds);
    elastic_seat seat;
    auto found = await_seat(*store, base.job_id, base.worker_id, first, {veteran, lost},
                            plan_deadline, seat, &stop_requested);
    if (!found.ok())
      return found;
    if (seat.removed)
      return {status_code::removed,
              "troupe-run's membership epoch " + std::to_string(seat.epoch) +
                " has no place for worker " + std::to_string(base.worker_id) + " on " +
                base.hostname + " (its host left the job or the job is at --max-np)"};
    identity id = base;
    static_cast<backends::rank_layout&>(id) = seat.layout;
    id.job_id = base.job_id + "/epoch" + std::to_string(seat.epoch);
    auto started = bootstrap(seat.epoch, id, start_deadline(cfg));
    if (started.ok()) {
      newcomers = has_newcomers(*store, base.job_id, seat);
      veteran = true;
      read_host_states();
      return started;
    }
    // A member of this epoch is missing (failed, left, or resetting): the
    // epoch cannot start, and troupe-run plans the next one only once
    // every member arrived there, exited or was failed. Returning the
    // error would hold that plan back until the reset timeout; out of
    // init() it would end this process, and troupe-run would blacklist its
    // healthy host. So arrive at the next epoch and wait for its plan
    // (troupe-run publishes it, or kills this worker at the reset
    // barrier's deadline). A failure of this process's own (two processes
    // claiming one rank, a backend that cannot start here) is returned, and
    // so is a second such failure: troupe-run then learns of this host,
    // rather than the worker resetting forever.
    const auto abandoned = [&] {
      // troupe-run opens the next barrier once it noticed the death, which
      // the survivors' backends may have seen first: a moment for it.
      const auto patience = std::chrono::milliseconds(
        static_cast<int64_t>(1000 * std::min(5.0, cfg.reset_timeout_seconds)));
      try {
        return store->wait({elastic::barrier_key(base.job_id, seat.epoch + 1)}, patience);
      } catch (const elastic::store_error&) {
        return false;
      }
    };
    if (!retry_next_epoch(started, own_failures, abandoned))
      return started;
    spdlog::warn("troupe worker {}: membership epoch {} did not start ({}); waiting for "
                 "troupe-run's epoch {}",
                 base.worker_id, seat.epoch, started.message(), seat.epoch + 1);
    // The peers this worker lost in that epoch (connected, then gone) tell
    // troupe-run whom not to wait for at the next barrier.
    lost = lost_ranks(leave_epoch(seat.epoch + 1), id.size);
    first = seat.epoch + 1;
  }
}

std::vector<int> runtime::impl::lost_ranks(const std::vector<int>& alive, int size) {
  std::vector<int> lost;
  for (int r = 0; !alive.empty() && r < size; ++r)
    if (std::find(alive.begin(), alive.end(), r) == alive.end())
      lost.push_back(r);
  return lost;
}

bool retry_next_epoch(const status& why, int& own_failures,
                      const std::function<bool()>& abandoned) {
  switch (why.code()) {
  case status_code::reset:
  case status_code::timeout:
  case status_code::peer_lost:
    return true;
  case status_code::invalid_argument:
    return false;
  default:
    return ++own_failures < max_failed_epochs && abandoned();
  }
}

} // namespace troupe::workers
