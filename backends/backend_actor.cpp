#include "backends/backend_actor.hpp"

#include <optional>

#include "backends/execute.hpp"
#include "metrics/collective_metrics.hpp"

namespace troupe::backends {

namespace {

using namespace troupe::actors;

struct backend_state {
  std::shared_ptr<backend> impl;
  int set_rank = 0;
  int set_size = 1;
  backends::scratch_buffers scratch;
  std::shared_ptr<metrics::collective_metrics> metrics;
  // Set by (abort): works still queued are not run.
  std::optional<status> aborted;
  static constexpr const char* name = "troupe.backend";
};

actors::backend_actor::behavior_type
serve_backend(actors::backend_actor::stateful_pointer<backend_state> self,
              std::shared_ptr<backend> impl, int set_rank, int set_size,
              std::shared_ptr<metrics::collective_metrics> metrics) {
  self->state.impl = std::move(impl);
  self->state.metrics = std::move(metrics);
  self->state.set_rank = set_rank;
  self->state.set_size = set_size;
  return {
    [=](connect_atom) -> status {
      try {
        self->state.impl->connect();
        return {};
      } catch (const std::exception& e) {
        return {status_code::backend, e.what()};
      }
    },
    // Sent with high priority, so it overtakes the works queued behind the
    // one running: after an abort they answer at once instead of running
    // against peers that are gone or have stopped.
    [=](abort_atom, const status& why) { self->state.aborted = why; },
    [=](execute_atom, const collective_work_ptr& work)
      -> caf::result<executed_atom, uint64_t, status, list_stats> {
      auto& st = self->state;
      if (st.aborted)
        return {executed_atom::value, work->id, *st.aborted, list_stats{}};
      const auto start = std::chrono::steady_clock::now();
      auto result =
        execute({*st.impl, st.set_rank, st.set_size, st.scratch, work->trace}, *work);
      const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      st.metrics->executed(*work, result, seconds, self->mailbox().size());
      const list_stats moved{0, result.ok() ? payload_bytes(*work) : 0, seconds};
      return {executed_atom::value, work->id, std::move(result), moved};
    },
  };
}

} // namespace

actors::backend_actor spawn_backend_actor(caf::actor_system& sys, std::unique_ptr<backend> b,
                                          int set_rank, int set_size,
                                          std::shared_ptr<metrics::collective_metrics> metrics) {
  return sys.spawn<caf::detached>(serve_backend, std::shared_ptr<backend>(std::move(b)),
                                  set_rank, set_size, std::move(metrics));
}

} // namespace troupe::backends
