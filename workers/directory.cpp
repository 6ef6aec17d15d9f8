#include "workers/directory.hpp"

#include <utility>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/protocols.hpp"

namespace troupe::workers {

namespace {

using namespace troupe::actors;
using troupe::actors::supervisor_actor;

struct directory_state {
  int64_t epoch = -1;
  supervisor_actor supervisor;
  // Lookups of epochs that have not entered yet.
  std::vector<std::pair<int64_t, caf::typed_response_promise<supervisor_actor>>> waiting;
  static constexpr const char* name = "troupe.directory";
};

caf::behavior directory(caf::stateful_actor<directory_state>* self) {
  return {
    [=](enter_atom, int64_t epoch, const supervisor_actor& supervisor) {
      auto& st = self->state;
      if (epoch < st.epoch)
        return;
      st.epoch = epoch;
      st.supervisor = supervisor;
      auto waiting = std::move(st.waiting);
      for (auto& [asked, rp] : waiting) {
        if (asked > epoch)
          st.waiting.emplace_back(asked, std::move(rp));
        else
          rp.deliver(asked == epoch ? supervisor : supervisor_actor{});
      }
    },
    [=](lookup_atom, int64_t epoch) -> caf::result<supervisor_actor> {
      auto& st = self->state;
      if (epoch == st.epoch)
        return st.supervisor;
      if (epoch < st.epoch)
        return supervisor_actor{};
      auto rp = self->make_response_promise<supervisor_actor>();
      st.waiting.emplace_back(epoch, rp);
      return rp;
    },
  };
}

} // namespace

caf::actor spawn_directory(caf::actor_system& sys) {
  return sys.spawn(directory);
}

} // namespace troupe::workers
