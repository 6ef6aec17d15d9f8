#include "workers/directory.hpp"

#include <utility>
#include <vector>

#include "actors/atoms.hpp"

namespace troupe::workers {

namespace {

using namespace troupe::actors;

struct directory_state {
  int64_t epoch = -1;
  caf::actor supervisor;
  // Lookups of epochs that have not entered yet.
  std::vector<std::pair<int64_t, caf::typed_response_promise<caf::actor>>> waiting;
  static constexpr const char* name = "troupe.directory";
};

caf::behavior directory(caf::stateful_actor<directory_state>* self) {
  return {
    [=](enter_atom, int64_t epoch, const caf::actor& supervisor) {
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
          rp.deliver(asked == epoch ? supervisor : caf::actor{});
      }
    },
    [=](lookup_atom, int64_t epoch) -> caf::result<caf::actor> {
      auto& st = self->state;
      if (epoch == st.epoch)
        return st.supervisor;
      if (epoch < st.epoch)
        return caf::actor{};
      auto rp = self->make_response_promise<caf::actor>();
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
