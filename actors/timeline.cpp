#include "actors/timeline.hpp"

#include <chrono>
#include <memory>

#include <spdlog/spdlog.h>

#include "actors/atoms.hpp"
#include "actors/timeline_writer.hpp"

namespace troupe::actors {

namespace {

struct timeline_state {
  std::unique_ptr<timeline_writer> writer;  // null while stopped
  static constexpr const char* name = "troupe.timeline";
};

status open_writer(timeline_state& st, const std::string& path) {
  try {
    st.writer = std::make_unique<timeline_writer>(path);
    return {};
  } catch (const std::exception& e) {
    st.writer.reset();
    return {status_code::invalid_argument, e.what()};
  }
}

caf::behavior timeline_actor(caf::stateful_actor<timeline_state>* self, std::string path) {
  if (!path.empty())
    if (auto s = open_writer(self->state, path); !s.ok())
      spdlog::error("timeline disabled: {}", s.message());
  return {
    [=](timeline_atom, const std::string& tensor, const std::string& phase,
        const std::string& activity, int64_t ts_us) {
      if (auto& w = self->state.writer)
        w->event(tensor, phase.empty() ? 'i' : phase[0], activity, ts_us);
    },
    [=](timeline_atom, const std::string& name, int64_t ts_us) {
      if (auto& w = self->state.writer)
        w->mark(name, ts_us);
    },
    [=](tl_start_atom, const std::string& file) { return open_writer(self->state, file); },
    [=](tl_stop_atom) { self->state.writer.reset(); },
  };
}

} // namespace

caf::actor spawn_timeline(caf::actor_system& sys, const std::string& path) {
  return sys.spawn<caf::detached>(timeline_actor, path);
}

int64_t timeline_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

} // namespace troupe::actors
