#include "actors/timeline.hpp"

#include <chrono>
#include <memory>

#include <spdlog/spdlog.h>

#include "actors/atoms.hpp"
#include "actors/timeline_writer.hpp"

namespace troupe::actors {

namespace {

caf::behavior timeline_actor(caf::event_based_actor*, std::shared_ptr<timeline_writer> writer) {
  return {
    [=](timeline_atom, const std::string& tensor, const std::string& phase,
        const std::string& activity, int64_t ts_us) {
      writer->event(tensor, phase.empty() ? 'i' : phase[0], activity, ts_us);
    },
  };
}

} // namespace

caf::actor spawn_timeline(caf::actor_system& sys, const std::string& path) {
  std::shared_ptr<timeline_writer> writer;
  try {
    writer = std::make_shared<timeline_writer>(path);
  } catch (const std::exception& e) {
    spdlog::error("timeline disabled: {}", e.what());
    return {};
  }
  return sys.spawn<caf::detached>(timeline_actor, std::move(writer));
}

int64_t timeline_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

} // namespace troupe::actors
