#include "backends/backend_actor.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <pthread.h>

#include <spdlog/spdlog.h>

#include "backends/thread_affinity.hpp"
#include "ipc/cpu_affinity.hpp"
#include "metrics/collective_metrics.hpp"

namespace troupe::backends {

namespace {

using namespace troupe::actors;
using clock = std::chrono::steady_clock;
using executed_promise = caf::typed_response_promise<executed_atom, uint64_t, status, list_stats>;

// Back-off between looks at running works: a collective of microseconds is
// seen within tens of them, a long one costs a wake-up per millisecond
// instead of a spinning core.
constexpr std::chrono::microseconds first_poll{20};
constexpr std::chrono::microseconds slowest_poll{1000};

// What the actor's thread and backend_ref::run_here share.
class backend_standing {
public:
  void connected() {
    connected_.store(true, std::memory_order_release);
  }
  // Whether a work may run now on another thread than the actor's: the
  // backend is connected and not aborted.
  bool usable() const {
    return connected_.load(std::memory_order_acquire) && !aborted();
  }
  // Set: works answer with it without running.
  std::optional<status> aborted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return aborted_;
  }
  void abort(const status& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = why;
  }
  // A communicator that failed a work is in no known state (a peer may
  // still be inside that collective, or one this rank skipped): the works
  // behind it answer with its error instead of meeting the peers' next
  // collective with the wrong bytes, until the negotiator aborts the set
  // for good.
  void account_for(const status& result) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (result.code() == status_code::backend && !aborted_)
      aborted_ = result;
  }

private:
  std::atomic<bool> connected_{false};
  mutable std::mutex mutex_;
  std::optional<status> aborted_;
};

// Counts a finished work in `metrics` (`queued`: works waiting behind it)
// and returns what it adds to its list's stats.
list_stats account(backend_standing& standing, metrics::collective_metrics& metrics,
                   const collective_work& work, const status& result, clock::time_point started,
                   size_t queued) {
  standing.account_for(result);
  const double seconds = std::chrono::duration<double>(clock::now() - started).count();
  const uint64_t bytes = payload_bytes(work);
  metrics.executed(work, result, bytes, seconds, queued);
  const int64_t chunk =
    work.fusion_chunk_bytes ? static_cast<int64_t>(*work.fusion_chunk_bytes) : -1;
  return {0, result.ok() ? bytes : 0, seconds, chunk};
}

// A work the backend has started and not yet let go of.
struct running_work {
  collective_work_ptr work;  // keeps the entries alive until then
  std::unique_ptr<completion> done;
  clock::time_point started;
  executed_promise reply;
};

struct backend_state {
  // Shared only with the interrupt, which holds it while it aborts.
  std::shared_ptr<backend> impl;
  std::shared_ptr<metrics::collective_metrics> metrics;
  std::shared_ptr<backend_standing> standing;
  std::vector<running_work> running;
  std::chrono::microseconds poll_delay{0};
  bool poll_scheduled = false;
  bool answer_first = false;  // see finish_work
  // See backend_actor_options::cpus; both empty when the thread stays put.
  std::vector<int> idle_cpus;
  std::vector<int> work_cpus;
  static constexpr const char* name = "troupe.backend";
};

using self_pointer = actors::backend_actor::stateful_pointer<backend_state>;

// Runs the backend's thread on `cpus` (none: leaves it); where the kernel
// refuses, it stays where it is from then on.
void move_to(backend_state& st, const std::vector<int>& cpus) {
  if (cpus.empty())
    return;
  if (auto why = ipc::run_current_thread_on(cpus); !why.empty()) {
    spdlog::warn("the {} backend's thread no longer moves between the runtime's CPU and the "
                 "process's: {}",
                 st.impl->name(), why);
    st.idle_cpus.clear();
    st.work_cpus.clear();
  }
}

// Completes the callers' handles of `work` if it succeeded with `result`,
// a thread hop before the negotiator hears of it (which keeps its
// bookkeeping; a failure is the negotiator's to word: it may name a lost
// peer), counts it, and answers `reply`. While a timeline is written the
// negotiator completes them too, after it closed the spans: a caller that
// stops the timeline once its handles completed finds them closed. Last
// first: a caller that waits on its handles in submission order (Horovod's
// synchronize loop) then wakes once, when the first one completes, and
// finds the others done; in list order it chased the loop, woken and asleep
// again on the next handle.
//
// On a rank bound to its CPU the answer goes first: the caller, woken
// first, would submit its next tensor while the negotiator has not heard of
// this work, and the negotiator, woken once per message on the one CPU,
// would run twice where it takes both at once (a 4-byte allreduce on 2
// bound ranks: 48.8 -> 44.8 us under MPI, 51.6 -> 44.3 us under Gloo,
// docs/benchmarks.md run (20)). The negotiator may also complete them
// first (it does for every work it hears of; a second completion is a
// no-op). Unbound, the caller wakes first: waking the negotiator first
// measured no better.
void finish_work(self_pointer self, const collective_work& work, status result,
                 clock::time_point started, executed_promise& reply) {
  const bool completes = result.ok() && !work.trace;
  const auto complete_handles = [&] {
    for (auto e = work.entries.rbegin(); e != work.entries.rend(); ++e)
      (*e)->handle->complete({});
  };
  if (completes && !self->state.answer_first)
    complete_handles();
  const auto moved = account(*self->state.standing, *self->state.metrics, work, result, started,
                             self->mailbox().size());
  reply.deliver(executed_atom::value, work.id, std::move(result), moved);
  if (completes && self->state.answer_first)
    complete_handles();
}

void schedule_poll(self_pointer self) {
  auto& st = self->state;
  if (st.poll_scheduled || st.running.empty())
    return;
  st.poll_scheduled = true;
  self->delayed_send(self, st.poll_delay, poll_atom::value);
}

// Answers every running work that has finished, in any order: each answer
// names its work.
void poll_running(self_pointer self) {
  auto& st = self->state;
  const auto still_running = [&](running_work& r) {
    auto result = r.done->poll();
    if (!result)
      return true;
    r.done.reset();  // let go of the backend before the answer (run_here)
    finish_work(self, *r.work, std::move(*result), r.started, r.reply);
    return false;
  };
  const auto before = st.running.size();
  st.running.erase(std::remove_if(st.running.begin(), st.running.end(),
                                  [&](auto& r) { return !still_running(r); }),
                   st.running.end());
  st.poll_delay = st.running.size() < before ? first_poll
                                             : std::min(st.poll_delay * 2, slowest_poll);
}

actors::backend_actor::behavior_type serve_backend(self_pointer self, std::shared_ptr<backend> impl,
                                                   std::shared_ptr<metrics::collective_metrics> metrics,
                                                   std::shared_ptr<backend_standing> standing,
                                                   backend_actor_options options) {
  self->state.impl = std::move(impl);
  self->state.metrics = std::move(metrics);
  self->state.standing = std::move(standing);
  self->state.answer_first = options.rank_bound;
  return {
    // The first message, on the actor's own thread, before the backend
    // starts threads of its own (they inherit its CPUs).
    [=](connect_atom) -> status {
      pthread_setname_np(pthread_self(), "troupe.backend");
      if (options.core) {
        if (auto why = pin_current_thread(*options.core); !why.empty())
          spdlog::error("TROUPE_THREAD_AFFINITY: the {} backend's thread runs unpinned: {}",
                        self->state.impl->name(), why);
      } else if (!options.cpus.empty()) {
        auto runtime_cpus = ipc::usable_cpu_list();
        if (auto why = ipc::run_current_thread_on(options.cpus); !why.empty()) {
          spdlog::warn("the {} backend's thread stays on the runtime's CPU: {}",
                       self->state.impl->name(), why);
        } else {
          self->state.idle_cpus = std::move(runtime_cpus);
          self->state.work_cpus = options.cpus;
        }
      }
      try {
        self->state.impl->connect();
        move_to(self->state, self->state.idle_cpus);
        self->state.standing->connected();
        return {};
      } catch (const std::exception& e) {
        return {status_code::backend, e.what()};
      }
    },
    // Sent with high priority, so it overtakes the works queued behind the
    // one running: after an abort they answer at once instead of running
    // against peers that are gone or have stopped. Works already started
    // answer once the backend has let go of their buffers (the interrupt
    // that comes with the abort makes it let go).
    [=](abort_atom, const status& why) { self->state.standing->abort(why); },
    [=](poll_atom) {
      self->state.poll_scheduled = false;
      poll_running(self);
      schedule_poll(self);
    },
    [=](execute_atom, const collective_work_ptr& work)
      -> caf::result<executed_atom, uint64_t, status, list_stats> {
      auto& st = self->state;
      if (auto aborted = st.standing->aborted())
        return {executed_atom::value, work->id, std::move(*aborted), list_stats{}};
      const auto started = clock::now();
      const bool wide = !st.work_cpus.empty() && payload_bytes(*work) > wide_work_bytes;
      if (wide)
        move_to(st, st.work_cpus);
      auto done = st.impl->start(*work);
      if (wide)
        move_to(st, st.idle_cpus);
      auto reply = self->make_response_promise<executed_atom, uint64_t, status, list_stats>();
      if (auto result = done->poll()) {
        done.reset();  // as in poll_running
        finish_work(self, *work, std::move(*result), started, reply);
        return reply;
      }
      st.running.push_back({work, std::move(done), started, reply});
      if (st.running.size() == 1)
        st.poll_delay = first_poll;
      schedule_poll(self);
      return reply;
    },
  };
}

} // namespace

actors::backend_ref spawn_backend_actor(caf::actor_system& sys, std::unique_ptr<backend> b,
                                        std::shared_ptr<metrics::collective_metrics> metrics,
                                        backend_actor_options options) {
  std::shared_ptr<backend> impl = std::move(b);
  std::weak_ptr<backend> weak = impl;
  actors::backend_ref ref;
  auto standing = std::make_shared<backend_standing>();
  ref.run_here = [weak, metrics, standing](collective_work& work) -> std::optional<ran_here> {
    if (static_cast<device_kind>(work.response.device_kind()) != device_kind::cpu ||
        payload_bytes(work) > run_here_bytes || !standing->usable())
      return std::nullopt;
    auto impl = weak.lock();
    if (!impl || !impl->waits_end(work))
      return std::nullopt;
    const auto started = clock::now();
    auto done = impl->start(work);
    std::optional<status> result;
    // A CPU backend has finished on return; any other is polled as the
    // actor polls it.
    for (auto delay = first_poll; !(result = done->poll());
         delay = std::min(delay * 2, slowest_poll))
      std::this_thread::sleep_for(delay);
    done.reset();
    auto moved = account(*standing, *metrics, work, *result, started, 0);
    return ran_here{std::move(*result), moved};
  };
  ref.actor = sys.spawn<caf::detached>(serve_backend, std::move(impl), std::move(metrics),
                                       std::move(standing), options);
  // Aborting may block for a while (Gloo waits for its network thread
  // once per pair), so it runs on a thread of its own, not the caller's.
  ref.interrupt = [&sys, weak] {
    sys.spawn<caf::detached>([weak] {
      if (auto impl = weak.lock())
        impl->abort();
    });
  };
  return ref;
}

} // namespace troupe::backends
