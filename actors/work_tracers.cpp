#include "actors/work_tracers.hpp"

#include <caf/all.hpp>

#include "actors/atoms.hpp"
#include "actors/timeline.hpp"

namespace troupe::actors {

void attach_tracers(const caf::actor& timeline, collective_work& work) {
  std::vector<std::string> names;
  for (const auto& e : work.entries)
    names.push_back(e->request.tensor_name());
  auto edge = [timeline, names](const std::string& activity, char phase, int64_t ts_us) {
    for (const auto& name : names)
      caf::anon_send(timeline, timeline_atom::value, name, std::string(1, phase), activity, ts_us);
  };
  work.trace = [edge](const std::string& activity, char phase) {
    edge(activity, phase, timeline_now_us());
  };
  work.past_trace = [edge](const std::string& activity, int64_t began_us_ago,
                           int64_t ended_us_ago) {
    const auto now = timeline_now_us();
    edge(activity, 'B', now - began_us_ago);
    edge(activity, 'E', now - ended_us_ago);
  };
}

} // namespace troupe::actors
