#include "workers/process_set_registry.hpp"

#include <algorithm>
#include <cstring>

#include "actors/atoms.hpp"

namespace troupe::workers {

namespace {

using namespace troupe::actors;

tensor_entry_ptr internal_entry(v1::OpType op, const std::string& name) {
  auto e = std::make_shared<tensor_entry>();
  e->request.set_op(op);
  e->request.set_tensor_name(name);
  e->request.set_dtype(v1::DATA_TYPE_INT32);
  e->handle = std::make_shared<detail::handle_state>();
  return e;
}

// "rank 0 sent [0, 2], rank 1 sent [1, 3]" when the ranks disagree.
std::string disagreement(const std::vector<std::vector<int32_t>>& all) {
  std::string out;
  for (size_t r = 0; r < all.size(); ++r)
    out += (out.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " sent " +
           ranks_text(std::vector<int>(all[r].begin(), all[r].end()));
  return out;
}

} // namespace

process_set_registry::process_set_registry(caf::actor_system& sys, caf::actor supervisor,
                                           caf::actor global_negotiator, const identity& id,
                                           const config& cfg)
  : sys_(sys), supervisor_(std::move(supervisor)), id_(id), cfg_(cfg), table_(id.size) {
  negotiators_.emplace(0, std::move(global_negotiator));
}

caf::actor process_set_registry::negotiator(int32_t id) const {
  auto it = negotiators_.find(id);
  return it == negotiators_.end() ? caf::actor{} : it->second;
}

status process_set_registry::gather(const std::string& name, std::vector<int32_t> values,
                                    std::vector<std::vector<int32_t>>& all) {
  auto e = internal_entry(v1::OP_TYPE_ALLGATHER, name);
  e->request.add_shape(static_cast<int64_t>(values.size()));
  e->input = tensor{values.data(), data_type::int32, {static_cast<int64_t>(values.size())}};
  e->output = e->input;
  auto state = e->handle;
  caf::anon_send(negotiators_.at(0), submit_atom::value, entry_batch{e});
  handle h{state};
  if (auto s = h.wait(); !s.ok())
    return s;
  // Every rank sent as many values (see add): equal rows, in rank order.
  std::vector<int32_t> flat(h.output().size() / sizeof(int32_t));
  std::memcpy(flat.data(), h.output().data(), h.output().size());
  all.clear();
  const auto width = static_cast<std::ptrdiff_t>(values.size());
  for (auto at = flat.begin(); at + width <= flat.end(); at += width)
    all.emplace_back(at, at + width);
  return {};
}

status process_set_registry::barrier(const std::string& name) {
  auto e = internal_entry(v1::OP_TYPE_BARRIER, name);
  handle h{e->handle};
  caf::anon_send(negotiators_.at(0), submit_atom::value, entry_batch{e});
  return h.wait();
}

status process_set_registry::add(const std::vector<int>& ranks, int32_t& id) {
  const auto serial = ++serial_;
  std::vector<std::vector<int32_t>> all;
  const auto tag = std::to_string(serial);
  // Fixed width on every rank (count, ranks, padding), whatever it asked.
  std::vector<int32_t> mine(static_cast<size_t>(id_.size) + 1, -1);
  const bool too_many = ranks.size() > static_cast<size_t>(id_.size);
  mine[0] = too_many ? -1 : static_cast<int32_t>(ranks.size());
  for (size_t i = 0; i < ranks.size() && !too_many; ++i)
    mine[i + 1] = ranks[i];
  if (auto s = gather("troupe.process_set.add." + tag, std::move(mine), all); !s.ok())
    return s;
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
  if (auto s = table_.validate(ranks); !s.ok())
    return s;
  id = table_.add(ranks);
  const auto& members = *table_.ranks(id);
  status started;
  if (std::binary_search(members.begin(), members.end(), id_.rank)) {
    caf::scoped_actor self{sys_};
    const auto deadline = std::chrono::milliseconds(
      static_cast<int64_t>(cfg_.start_timeout_seconds * 1000));
    self
      ->request(supervisor_, deadline, start_atom::value, static_cast<uint32_t>(id), members,
                serial)
      .receive(
        [&](status& s, caf::actor& negotiator) {
          started = std::move(s);
          if (started.ok())
            negotiators_[id] = std::move(negotiator);
        },
        [&](caf::error& err) {
          started = {status_code::timeout,
                     "process set " + std::to_string(id) + " did not start: " + sys_.render(err)};
        });
  }
  // Every rank waits here, also one whose start failed: the others would
  // otherwise wait for it forever.
  auto registered = barrier("troupe.process_set.added." + tag);
  return started.ok() ? registered : started;
}

status process_set_registry::remove(int32_t id) {
  const auto serial = ++serial_;
  std::vector<std::vector<int32_t>> all;
  const auto tag = std::to_string(serial);
  if (auto s = gather("troupe.process_set.remove." + tag, {id}, all); !s.ok())
    return s;
  if (std::adjacent_find(all.begin(), all.end(), std::not_equal_to<>()) != all.end())
    return {status_code::invalid_argument,
            "Attempted to remove different process sets on different ranks: " +
              disagreement(all) + "."};
  if (id == 0)
    return {status_code::invalid_argument, "The global process set (id 0) cannot be removed."};
  if (!table_.remove(id))
    return {status_code::invalid_argument,
            "Process set does not exist or has not been registered."};
  if (negotiators_.erase(id) > 0)
    caf::anon_send(supervisor_, stop_atom::value, static_cast<uint32_t>(id));
  return barrier("troupe.process_set.removed." + tag);
}

} // namespace troupe::workers
