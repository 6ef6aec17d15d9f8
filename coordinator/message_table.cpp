#include "coordinator/message_table.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "proto/op_properties.hpp"
#include "proto/request_checks.hpp"
#include "troupe/types.hpp"

namespace troupe::coordinator {

namespace {

std::string shape_text(const v1::Request& r) {
  return to_string(shape_t(r.shape().begin(), r.shape().end()));
}

std::string op_text(v1::OpType op) {
  return properties(op).name;
}

const char* device_text(v1::DeviceKind kind) {
  return kind == v1::DEVICE_KIND_CUDA ? "GPU" : "CPU";
}

std::string dtype_text(v1::DataType d) {
  return to_string(static_cast<data_type>(d));
}

std::string reduce_text(v1::ReduceOp op) {
  return to_string(static_cast<reduce_op>(op));
}

std::string scale_text(const v1::Request& r) {
  return fmt::format("({}, {})", r.prescale_factor(), r.postscale_factor());
}

// Builds "rank 0 sent X, rank 1 sent Y" listing each distinct value once with
// the ranks that sent it, when `field` does not agree across members.
template <class Field>
std::optional<std::string> disagreement(
  const std::vector<std::optional<v1::Request>>& by_rank, Field field) {
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (!by_rank[r])
      continue;  // a joined rank
    auto value = field(*by_rank[r]);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == value; });
    if (it == groups.end())
      groups.push_back({value, {r}});
    else
      it->second.push_back(r);
  }
  if (groups.size() < 2)
    return std::nullopt;
  std::string out;
  for (const auto& [value, ranks] : groups) {
    if (!out.empty())
      out += ", ";
    out += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i)
      out += (i ? "," : "") + std::to_string(ranks[i]);
    out += " sent " + value;
  }
  return out;
}

v1::Response error_response(const std::string& name, const std::string& text) {
  v1::Response resp;
  resp.set_op(v1::OP_TYPE_ERROR);
  resp.add_tensor_names(name);
  resp.mutable_error()->set_code(v1::ERROR_CODE_MISMATCH);
  resp.mutable_error()->set_message(text);
  return resp;
}

} // namespace

v1::Response make_response(const std::string& name,
                           const std::vector<std::optional<v1::Request>>& by_rank) {
  const auto& first = **std::find_if(by_rank.begin(), by_rank.end(),
                                     [](const auto& r) { return r.has_value(); });
  auto mismatch = [&](const char* what, auto field) -> std::optional<v1::Response> {
    if (auto diff = disagreement(by_rank, field))
      return error_response(name, fmt::format("Mismatched {} for tensor '{}': {}.",
                                              what, name, *diff));
    return std::nullopt;
  };
  if (auto e = mismatch("operations", [](const auto& r) { return op_text(r.op()); }))
    return *e;
  if (auto e = mismatch("data types", [](const auto& r) { return dtype_text(r.dtype()); }))
    return *e;
  if (auto e = mismatch("groups", [](const auto& r) {
        return r.group_size() > 1 ? fmt::format("'{}' of {}", r.group_name(), r.group_size())
                                  : std::string("no group");
      }))
    return *e;
  const auto op = first.op();
  const bool someone_joined = std::any_of(by_rank.begin(), by_rank.end(),
                                          [](const auto& r) { return !r.has_value(); });
  const auto& props = properties(op);
  if (someone_joined && props.join_conflict)
    return error_response(name, props.join_conflict);
  if (auto diff = disagreement(by_rank, [](const auto& r) {
        return std::string(device_text(r.device_kind()));
      }))
    return error_response(
      name, fmt::format("Mismatched {} CPU/GPU device selection: One rank specified device "
                        "CPU, but another rank specified device GPU (tensor '{}': {}).",
                        op_text(op), name, *diff));
  const bool reduces = props.reduces;
  const bool gathers = props.gathers;
  if (reduces) {
    if (auto e = mismatch("reduction operations",
                          [](const auto& r) { return reduce_text(r.reduce_op()); }))
      return *e;
    if (auto e = mismatch("prescale and/or postscale factors", scale_text))
      return *e;
  }
  if (props.same_shape) {
    if (auto e = mismatch("tensor shapes", shape_text))
      return *e;
  }
  if (op == v1::OP_TYPE_BROADCAST) {
    if (auto e = mismatch("root ranks",
                          [](const auto& r) { return std::to_string(r.root_rank()); }))
      return *e;
  }
  if (gathers) {
    if (auto e = mismatch("tensor ranks (number of dimensions)",
                          [](const auto& r) { return std::to_string(r.shape_size()); }))
      return *e;
    // Not scalars: every request passed check_request in add().
    auto trailing = [](const v1::Request& r) {
      return to_string(shape_t(r.shape().begin() + 1, r.shape().end()));
    };
    if (auto e = mismatch("trailing dimensions (all but the first)", trailing))
      return *e;
  }

  v1::Response resp;
  resp.set_op(op);
  resp.add_tensor_names(name);
  resp.set_dtype(first.dtype());
  resp.set_root_rank(first.root_rank());
  resp.set_reduce_op(first.reduce_op());
  resp.set_prescale_factor(first.prescale_factor());
  resp.set_postscale_factor(first.postscale_factor());
  resp.set_device_kind(first.device_kind());
  if (op == v1::OP_TYPE_ALLGATHER) {
    for (const auto& r : by_rank)
      resp.add_tensor_sizes(r->shape(0));
    resp.add_row_elements(num_elements(shape_t(first.shape().begin() + 1, first.shape().end())));
  }
  if (op == v1::OP_TYPE_ALLREDUCE)
    resp.add_tensor_sizes(num_elements(shape_t(first.shape().begin(), first.shape().end())));
  return resp;
}

message_table::message_table(int32_t set_size)
  : set_size_(set_size), joined_(static_cast<size_t>(set_size), false) {
}

std::optional<std::string> message_table::add(const v1::Request& request, bool from_cache) {
  const auto rank = request.request_rank();
  if (rank < 0 || rank >= set_size_)
    return fmt::format("request for '{}' from rank {} outside the set of size {}",
                       request.tensor_name(), rank, set_size_);
  if (!from_cache)
    if (auto err = check_request(request); !err.empty())
      return reject(request, err);
  if (request.op() == v1::OP_TYPE_JOIN)
    return join(rank);
  if (answer_late(request))
    return std::nullopt;
  auto [it, inserted] = entries_.try_emplace(request.tensor_name());
  auto& e = it->second;
  if (inserted) {
    e.by_rank.resize(static_cast<size_t>(set_size_));
    e.first_seen = clock::now();
    e.group = request.group_size() > 1 ? request.group_name() : std::string();
    if (request.deadline_ms() > 0)
      e.deadline = e.first_seen + std::chrono::milliseconds(request.deadline_ms());
  }
  auto& slot = e.by_rank[static_cast<size_t>(rank)];
  if (slot)
    return fmt::format("rank {} requested '{}' twice before it completed", rank,
                       request.tensor_name());
  slot = request;
  if (is_ready(e))
    release(request.tensor_name(), e);
  return std::nullopt;
}

bool message_table::is_ready(const entry& e) const {
  for (size_t r = 0; r < e.by_rank.size(); ++r)
    if (!e.by_rank[r] && !joined_[r])
      return false;
  return true;
}

std::vector<int32_t> message_table::missing(const entry& e) const {
  std::vector<int32_t> out;
  for (size_t r = 0; r < e.by_rank.size(); ++r)
    if (!e.by_rank[r] && !joined_[r])
      out.push_back(static_cast<int32_t>(r));
  return out;
}

std::optional<std::string> message_table::join(int32_t rank) {
  if (joined_[static_cast<size_t>(rank)])
    return fmt::format("rank {} joined twice", rank);
  joined_[static_cast<size_t>(rank)] = true;
  last_joined_ = rank;
  if (++joined_count_ == set_size_) {
    ready_.push_back(join_name);
    return std::nullopt;
  }
  // Tensors that only this rank was missing can run now, in arrival order.
  std::vector<std::pair<clock::time_point, std::string>> newly;
  for (auto& [name, e] : entries_)
    if (!e.released && is_ready(e))
      newly.emplace_back(e.first_seen, name);
  std::sort(newly.begin(), newly.end());
  for (const auto& n : newly)
    release(n.second, entries_.at(n.second));
  return std::nullopt;
}

void message_table::release(const std::string& name, entry& e) {
  e.released = true;
  const auto& first = **std::find_if(e.by_rank.begin(), e.by_rank.end(),
                                     [](const auto& r) { return r.has_value(); });
  const bool agreed = std::all_of(e.by_rank.begin(), e.by_rank.end(), [&](const auto& r) {
    return !r || (r->group_name() == first.group_name() && r->group_size() == first.group_size());
  });
  // A disagreement about the group is reported by make_response.
  if (!agreed || first.group_size() <= 1) {
    ready_.push_back(name);
    return;
  }
  auto& members = waiting_groups_[first.group_name()];
  members.push_back(name);
  if (static_cast<int32_t>(members.size()) < first.group_size())
    return;
  ready_.insert(ready_.end(), members.begin(), members.end());
  waiting_groups_.erase(first.group_name());
}

v1::Response message_table::pop_ready(requests* by_rank) {
  auto name = std::move(ready_.front());
  ready_.pop_front();
  if (name == join_name && !entries_.count(name)) {
    // Every rank joined: join() returns everywhere, and a new round begins.
    v1::Response resp;
    resp.set_op(v1::OP_TYPE_JOIN);
    resp.add_tensor_names(join_name);
    resp.set_last_joined_rank(last_joined_);
    std::fill(joined_.begin(), joined_.end(), false);
    joined_count_ = 0;
    if (by_rank)
      by_rank->clear();
    return resp;
  }
  auto node = entries_.extract(name);
  auto resp = make_response(name, node.mapped().by_rank);
  if (by_rank)
    *by_rank = std::move(node.mapped().by_rank);
  return resp;
}

void message_table::fail_entry(const std::string& name, v1::ErrorCode code,
                               const std::string& why) {
  auto node = entries_.extract(name);
  auto resp = error_response(name, why);
  resp.mutable_error()->set_code(code);
  tombstone t{resp, std::vector<bool>(static_cast<size_t>(set_size_), false)};
  bool owed = false;
  for (auto r : missing(node.mapped()))
    owed = t.owed[static_cast<size_t>(r)] = true;
  failed_.push_back(std::move(resp));
  if (!owed || tombstones_.count(name))
    return;
  constexpr size_t max_tombstones = 1024;
  if (tombstone_order_.size() == max_tombstones) {
    tombstones_.erase(tombstone_order_.front());
    tombstone_order_.pop_front();
  }
  tombstones_.emplace(name, std::move(t));
  tombstone_order_.push_back(name);
}

std::string message_table::reject(const v1::Request& request, const std::string& err) {
  const auto& name = request.tensor_name();
  const auto why = fmt::format("rank {} sent an invalid request: {}", request.request_rank(), err);
  if (entries_.count(name)) {
    abandon(name, v1::ERROR_CODE_INVALID_ARGUMENT, why);
    // The rank that sent it has had its answer: it owes nothing.
    if (auto t = tombstones_.find(name); t != tombstones_.end())
      t->second.owed[static_cast<size_t>(request.request_rank())] = false;
  } else {
    auto resp = error_response(name, why);
    resp.mutable_error()->set_code(v1::ERROR_CODE_INVALID_ARGUMENT);
    failed_.push_back(std::move(resp));
  }
  return why;
}

bool message_table::answer_late(const v1::Request& request) {
  auto it = tombstones_.find(request.tensor_name());
  if (it == tombstones_.end())
    return false;
  auto& t = it->second;
  auto owed = t.owed.begin() + request.request_rank();
  if (!*owed)
    return false;  // a new round of a name that failed before
  *owed = false;
  failed_.push_back(t.error);
  if (std::none_of(t.owed.begin(), t.owed.end(), [](bool b) { return b; })) {
    tombstone_order_.erase(
      std::find(tombstone_order_.begin(), tombstone_order_.end(), it->first));
    tombstones_.erase(it);
  }
  return true;
}

void message_table::abandon(const std::string& name, v1::ErrorCode code,
                            const std::string& why) {
  auto it = entries_.find(name);
  if (it == entries_.end())
    return;
  const auto group = it->second.group;
  fail_entry(name, code, why);
  if (group.empty())
    return;
  // Members still pending, and ready ones held for the group; a member
  // already released to ready_ (the ranks disagreed about its group) runs
  // or fails on its own.
  const auto held = waiting_groups_.find(group);
  auto is_held = [&](const std::string& n) {
    return held != waiting_groups_.end() &&
           std::find(held->second.begin(), held->second.end(), n) != held->second.end();
  };
  std::vector<std::string> siblings;
  for (const auto& [other, e] : entries_)
    if (e.group == group && (!e.released || is_held(other)))
      siblings.push_back(other);
  for (const auto& other : siblings)
    fail_entry(other, code,
               fmt::format("Tensor '{}' of group '{}' cannot run: its group member '{}' "
                           "failed: {}",
                           other, group, name, why));
  waiting_groups_.erase(group);
}

std::vector<v1::Response> message_table::take_failed() {
  return std::exchange(failed_, {});
}

std::optional<message_table::clock::time_point> message_table::next_deadline() const {
  std::optional<clock::time_point> out;
  for (const auto& [name, e] : entries_)
    if (e.deadline && !e.released && (!out || *e.deadline < *out))
      out = e.deadline;
  return out;
}

std::vector<std::string> message_table::expire(clock::time_point now) {
  std::vector<std::pair<std::string, std::string>> late;
  for (const auto& [name, e] : entries_) {
    if (!e.deadline || e.released || *e.deadline > now)
      continue;
    const auto waited = std::chrono::duration<double>(*e.deadline - e.first_seen).count();
    std::string ranks;
    for (auto r : missing(e))
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    late.emplace_back(name,
                      fmt::format("Collective '{}' timed out: rank(s) {} of the process set "
                                  "did not submit it within {} s of the first submission.",
                                  name, ranks, waited));
  }
  std::vector<std::string> out;
  for (auto& [name, why] : late) {
    abandon(name, v1::ERROR_CODE_TIMEOUT, why);
    out.push_back(std::move(why));
  }
  return out;
}

size_t message_table::pending() const {
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(),
                                           [](const auto& kv) { return !kv.second.released; }));
}

std::vector<std::pair<std::string, std::vector<int32_t>>>
message_table::missing_ranks(clock::time_point older_than) const {
  std::vector<std::pair<std::string, std::vector<int32_t>>> out;
  std::unordered_map<std::string, std::vector<int32_t>> group_missing;
  for (const auto& [name, e] : entries_)
    if (!e.released && !e.group.empty()) {
      auto& m = group_missing[e.group];
      for (auto r : missing(e))
        if (std::find(m.begin(), m.end(), r) == m.end())
          m.push_back(r);
    }
  for (const auto& [name, e] : entries_) {
    if (e.first_seen >= older_than)
      continue;
    if (!e.released)
      out.emplace_back(name, missing(e));
    else if (!e.group.empty() && waiting_groups_.count(e.group)) {
      auto m = group_missing[e.group];
      std::sort(m.begin(), m.end());
      out.emplace_back(name, std::move(m));
    }
  }
  return out;
}

} // namespace troupe::coordinator
