#include "backends/backend_actor.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "backends/thread_affinity.hpp"
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
  // Set by (abort): works still queued are not run.
  std::optional<status> aborted;
  std::vector<running_work> running;
  std::chrono::microseconds poll_delay{0};
  bool poll_scheduled = false;
  static constexpr const char* name = "troupe.backend";
};

using self_pointer = actors::backend_actor::stateful_pointer<backend_state>;

// Counts `work`, finished with `result`: what its answer reports it moved.
// A success completes the callers' handles here, a thread hop before the
// negotiator hears of it (which keeps its bookkeeping); a failure is the
// negotiator's to word (it may name a lost peer). While a timeline is
// written the negotiator completes them too, after it closed the spans: a
// caller that stops the timeline once its handles completed finds them
// closed. Last first: a caller that waits on its handles in submission
// order (Horovod's synchronize loop) then wakes once, when the first one
// completes, and finds the others done; in list order it chased the loop,
// woken and asleep again on the next handle.
list_stats finished_work(self_pointer self, const collective_work& work, const status& result,
                         clock::time_point started) {
  if (result.ok() && !work.trace)
    for (auto e = work.entries.rbegin(); e != work.entries.rend(); ++e)
      (*e)->handle->complete({});
  const double seconds = std::chrono::duration<double>(clock::now() - started).count();
  const uint64_t bytes = payload_bytes(work);
  self->state.metrics->executed(work, result, bytes, seconds, self->mailbox().size());
  const int64_t chunk =
    work.fusion_chunk_bytes ? static_cast<int64_t>(*work.fusion_chunk_bytes) : -1;
  return {0, result.ok() ? bytes : 0, seconds, chunk};
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
    const auto moved = finished_work(self, *r.work, *result, r.started);
    r.reply.deliver(executed_atom::value, r.work->id, std::move(*result), moved);
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
                                                   std::optional<int> core) {
  self->state.impl = std::move(impl);
  self->state.metrics = std::move(metrics);
  return {
    // The first message, on the actor's own thread.
    [=](connect_atom) -> status {
      if (core) {
        if (auto why = pin_current_thread(*core); !why.empty())
          spdlog::error("TROUPE_THREAD_AFFINITY: the {} backend's thread runs unpinned: {}",
                        self->state.impl->name(), why);
      }
      try {
        self->state.impl->connect();
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
    [=](abort_atom, const status& why) { self->state.aborted = why; },
    [=](poll_atom) {
      self->state.poll_scheduled = false;
      poll_running(self);
      schedule_poll(self);
    },
    [=](execute_atom, const collective_work_ptr& work)
      -> caf::result<executed_atom, uint64_t, status, list_stats> {
      auto& st = self->state;
      if (st.aborted)
        return {executed_atom::value, work->id, *st.aborted, list_stats{}};
      const auto started = clock::now();
      auto done = st.impl->start(*work);
      if (auto result = done->poll()) {
        const auto moved = finished_work(self, *work, *result, started);
        return {executed_atom::value, work->id, std::move(*result), moved};
      }
      auto reply = self->make_response_promise<executed_atom, uint64_t, status, list_stats>();
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
                                        std::optional<int> core) {
  std::shared_ptr<backend> impl = std::move(b);
  std::weak_ptr<backend> weak = impl;
  actors::backend_ref ref;
  ref.actor =
    sys.spawn<caf::detached>(serve_backend, std::move(impl), std::move(metrics), core);
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
