#include "workers/process_set_registry.hpp"

#include <algorithm>
#include <cstring>

#include "workers/control_dialer.hpp"


namespace troupe::workers {

namespace {

using namespace troupe::actors;
using std::chrono::milliseconds;

// "rank 0 sent [0, 2], rank 1 sent [1, 3]" when the ranks disagree.
std::string disagreement(const std::vector<std::vector<int32_t>>& all) {
  std::string out;
  for (size_t r = 0; r < all.size(); ++r)
    out += (out.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " sent " +
           ranks_text(std::vector<int>(all[r].begin(), all[r].end()));
  return out;
}

struct registry_state {
  int64_t epoch = 0;  // the membership epoch this registry serves
  supervisor_actor supervisor;
  identity id;
  config cfg;
  std::shared_ptr<process_set_snapshots> published;
  std::shared_ptr<const control_dialer> dialer;  // null for a job of one
  uint64_t serial = 0;  // calls so far: the same on every rank
  static constexpr const char* name = "troupe.process_set_registry";
};

using registry_self = process_set_registry_actor::stateful_pointer<registry_state>;

milliseconds deadline(const registry_state& st) {
  return milliseconds(static_cast<int64_t>(st.cfg.start_timeout_seconds * 1000));
}

// The latest snapshot if it still belongs to this registry's epoch.
std::shared_ptr<const process_set_snapshot> own_snapshot(const registry_state& st) {
  auto now = st.published->load();
  return now && now->epoch == st.epoch && now->unavailable.ok() ? now : nullptr;
}

const status superseded{status_code::reset,
                        "The job reset to a new membership epoch during this process-set "
                        "call; call reset() and retry."};

// Runs one internal collective on the global set and waits for it. The
// coordinator fails it on every rank once the deadline has passed; the
// local wait is only a backstop should the coordinator's rank vanish
// without the supervisor noticing.
status run_internal(registry_self self, const tensor_entry_ptr& e) {
  auto& st = self->state;
  auto sets = own_snapshot(st);
  if (!sets)
    return superseded;
  e->request.set_deadline_ms(deadline(st).count());
  handle h{handle_of(e)};
  submit_batch(sets->negotiator(0), entry_batch{e});
  auto s = h.wait_for(2 * deadline(st) + std::chrono::seconds(5));
  if (s.code() == status_code::timeout && !h.poll())
    return {status_code::timeout, "'" + e->request.tensor_name() +
                                    "' got no answer from the global set's coordinator"};
  return s;
}

tensor_entry_ptr internal_entry(v1::OpType op, const std::string& name) {
  auto e = std::make_shared<tensor_entry>();
  e->request.set_op(op);
  e->request.set_tensor_name(name);
  e->request.set_dtype(v1::DATA_TYPE_INT32);
  return e;
}

// An allgather of `values` (the same count on every rank): every rank's
// values, in rank order. The entry owns its input (stand_in): the backend
// may still read it after this call gave up waiting.
status gather(registry_self self, const std::string& name, const std::vector<int32_t>& values,
              std::vector<std::vector<int32_t>>& all) {
  auto e = internal_entry(v1::OP_TYPE_ALLGATHER, name);
  e->request.add_shape(static_cast<int64_t>(values.size()));
  e->stand_in.assign(reinterpret_cast<const char*>(values.data()),
                     reinterpret_cast<const char*>(values.data() + values.size()));
  e->input = tensor{e->stand_in.data(), data_type::int32, {static_cast<int64_t>(values.size())}};
  e->output = e->input;
  if (auto s = run_internal(self, e); !s.ok())
    return s;
  const auto& out = e->handle->output;
  std::vector<int32_t> flat(out.size() / sizeof(int32_t));
  std::memcpy(flat.data(), out.data(), out.size());
  all.clear();
  const auto width = static_cast<std::ptrdiff_t>(values.size());
  for (auto at = flat.begin(); at + width <= flat.end(); at += width)
    all.emplace_back(at, at + width);
  return {};
}

status barrier(registry_self self, const std::string& name) {
  return run_internal(self, internal_entry(v1::OP_TYPE_BARRIER, name));
}

// Starts this rank's part of set `id`; the negotiator goes into `next`.
status start_set(registry_self self, int32_t id, const std::vector<int>& members,
                 uint64_t serial, process_set_snapshot& next) {
  auto& st = self->state;
  // Along a control tree, the set's own connections first (see
  // control_links::set_contacts); its coordinator announces itself only
  // after every member's backend connected, so after these.
  if (st.dialer) {
    auto dialled = st.dialer->dial_set(members, std::chrono::steady_clock::now() + deadline(st));
    if (!dialled.ok())
      return {dialled.code(), "process set " + std::to_string(id) +
                                " did not start: " + dialled.message()};
  }
  status started;
  caf::scoped_actor asker{self->system()};
  asker
    ->request(st.supervisor, deadline(st), start_atom::value, static_cast<uint32_t>(id), members,
              serial)
    .receive(
      [&](status& s, set_entrance& entrance) {
        started = std::move(s);
        if (started.ok())
          next.entrances[id] = std::move(entrance);
      },
      [&](caf::error& err) {
        started = {status_code::timeout, "process set " + std::to_string(id) +
                                           " did not start: " + self->system().render(err)};
      });
  return started;
}

// Names unique across epochs: a reset starts the serial again.
std::string next_tag(registry_state& st) {
  return std::to_string(st.epoch) + "." + std::to_string(++st.serial);
}

status add(registry_self self, const std::vector<int>& ranks, int32_t& id) {
  auto& st = self->state;
  const auto tag = next_tag(st);
  const auto world = st.id.size;
  std::vector<std::vector<int32_t>> all;
  // Fixed width on every rank (count, ranks, padding), whatever it asked.
  std::vector<int32_t> mine(static_cast<size_t>(world) + 1, -1);
  const bool too_many = ranks.size() > static_cast<size_t>(world);
  mine[0] = too_many ? -1 : static_cast<int32_t>(ranks.size());
  for (size_t i = 0; i < ranks.size() && !too_many; ++i)
    mine[i + 1] = ranks[i];
  if (auto s = gather(self, "troupe.process_set.add." + tag, mine, all); !s.ok())
    return {s.code(), "add_process_set: " + s.message()};
  for (auto& row : all) {
    const auto n = static_cast<std::ptrdiff_t>(std::max(row.front(), 0));
    row = std::vector<int32_t>(row.begin() + 1, row.begin() + 1 + n);
  }
  if (std::adjacent_find(all.begin(), all.end(), std::not_equal_to<>()) != all.end())
    return {status_code::invalid_argument,
            "Attempted to register process set with mismatching values on different ranks: " +
              disagreement(all) + "."};
  if (too_many)
    return {status_code::invalid_argument,
            "Tried to register process set with more ranks than the job has."};
  auto base = own_snapshot(st);
  if (!base)
    return superseded;
  auto next = std::make_shared<process_set_snapshot>(*base);
  if (auto s = next->table.validate(ranks); !s.ok())
    return s;
  id = next->table.add(ranks);
  const auto members = *next->table.ranks(id);
  const bool member = std::binary_search(members.begin(), members.end(), st.id.rank);
  status started;
  if (member)
    started = start_set(self, id, members, st.serial, *next);
  // Published before the barrier: once any rank returns, every member
  // accepts collectives on the set.
  if (!st.published->replace(base, std::move(next)))
    return superseded;
  // Every rank waits here, also one whose start failed (the others would
  // otherwise wait for it until the deadline), and learns where it failed:
  // a set that did not start on one member is of no use to any rank.
  std::vector<std::vector<int32_t>> outcomes;
  auto registered = gather(self, "troupe.process_set.added." + tag, {started.ok() ? 1 : 0},
                           outcomes);
  std::vector<int> failed;
  for (size_t r = 0; r < outcomes.size(); ++r)
    if (outcomes[r].front() == 0)
      failed.push_back(static_cast<int>(r));
  if (member && (!started.ok() || !failed.empty())) {
    // The group (backend, coordinator), whole or half started, goes away
    // here; the id stays registered, as on every other rank.
    caf::anon_send(st.supervisor, stop_atom::value, static_cast<uint32_t>(id));
  }
  if (!started.ok())
    return started;
  if (!registered.ok())
    return {registered.code(), "add_process_set: " + registered.message()};
  if (!failed.empty())
    return {status_code::backend,
            "add_process_set: process set " + std::to_string(id) + " " + ranks_text(members) +
              " did not start on rank(s) " + ranks_text(failed) +
              " (their error says why); its id stays registered and unusable until "
              "remove_process_set"};
  return registered;
}

status remove(registry_self self, int32_t id) {
  auto& st = self->state;
  const auto tag = next_tag(st);
  std::vector<std::vector<int32_t>> all;
  if (auto s = gather(self, "troupe.process_set.remove." + tag, {id}, all); !s.ok())
    return {s.code(), "remove_process_set: " + s.message()};
  if (std::adjacent_find(all.begin(), all.end(), std::not_equal_to<>()) != all.end())
    return {status_code::invalid_argument,
            "Attempted to remove different process sets on different ranks: " +
              disagreement(all) + "."};
  if (id == 0)
    return {status_code::invalid_argument, "The global process set (id 0) cannot be removed."};
  auto base = own_snapshot(st);
  if (!base)
    return superseded;
  auto next = std::make_shared<process_set_snapshot>(*base);
  if (!next->table.remove(id))
    return {status_code::invalid_argument,
            "Process set does not exist or has not been registered."};
  const bool member = next->entrances.erase(id) > 0;
  if (!st.published->replace(base, std::move(next)))
    return superseded;
  if (member)
    caf::anon_send(st.supervisor, stop_atom::value, static_cast<uint32_t>(id));
  auto removed = barrier(self, "troupe.process_set.removed." + tag);
  return removed.ok() ? removed
                      : status{removed.code(), "remove_process_set: " + removed.message()};
}

process_set_registry_actor::behavior_type
registry(registry_self self, supervisor_actor supervisor, identity id, config cfg,
         std::shared_ptr<process_set_snapshots> published,
         std::shared_ptr<const control_dialer> dialer) {
  auto& st = self->state;
  st.dialer = std::move(dialer);
  st.supervisor = std::move(supervisor);
  st.id = std::move(id);
  st.cfg = std::move(cfg);
  st.published = std::move(published);
  st.epoch = st.published->load()->epoch;
  return {
    [=](add_set_atom, const std::vector<int>& ranks) -> caf::result<status, int32_t> {
      int32_t set_id = -1;
      auto s = add(self, ranks, set_id);
      return {std::move(s), set_id};
    },
    [=](remove_set_atom, int32_t set_id) -> caf::result<status, int32_t> {
      return {remove(self, set_id), set_id};
    },
  };
}

} // namespace

process_set_registry_actor
spawn_process_set_registry(caf::actor_system& sys, supervisor_actor supervisor,
                                      const identity& id, const config& cfg,
                                      std::shared_ptr<process_set_snapshots> published,
                                      std::shared_ptr<const control_dialer> dialer) {
  return sys.spawn<caf::detached>(registry, std::move(supervisor), id, cfg,
                                  std::move(published), std::move(dialer));
}

} // namespace troupe::workers
