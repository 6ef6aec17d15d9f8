#include "coordinator/message_table.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "proto/agreed_response.hpp"
#include "proto/op_properties.hpp"
#include "proto/request_checks.hpp"
#include "proto/request_parameters.hpp"
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
  const requests& by_rank, Field field) {
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

// Every member's request that is there agrees with `first` by `same`.
template <class Same>
bool agree(const requests& by_rank, const v1::Request& first,
           Same same) {
  return std::all_of(by_rank.begin(), by_rank.end(),
                     [&](const auto& r) { return !r || r.get() == &first || same(first, *r); });
}

// Equal dimensions from the `From`th on.
template <int From>
bool same_dims(const v1::Request& a, const v1::Request& b) {
  return std::equal(a.shape().begin() + std::min(From, a.shape_size()), a.shape().end(),
                    b.shape().begin() + std::min(From, b.shape_size()), b.shape().end());
}

// "rank 3", or "set ranks [3, 7)" for a control-tree node's merged range.
std::string senders_text(int64_t first, int64_t end) {
  return end == first + 1 ? fmt::format("rank {}", first)
                          : fmt::format("set ranks [{}, {})", first, end);
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
                           const requests& by_rank) {
  const auto& first = **std::find_if(by_rank.begin(), by_rank.end(),
                                     [](const auto& r) { return r != nullptr; });
  // `same` compares a field cheaply; only when some member differs are the
  // values formatted into the error naming who sent what.
  auto mismatch = [&](const char* what, auto same, auto text) -> std::optional<v1::Response> {
    if (agree(by_rank, first, same))
      return std::nullopt;
    if (auto diff = disagreement(by_rank, text))
      return error_response(name, fmt::format("Mismatched {} for tensor '{}': {}.",
                                              what, name, *diff));
    return std::nullopt;
  };
  if (auto e = mismatch(
        "operations", [](const auto& a, const auto& b) { return a.op() == b.op(); },
        [](const auto& r) { return op_text(r.op()); }))
    return *e;
  if (auto e = mismatch(
        "data types", [](const auto& a, const auto& b) { return a.dtype() == b.dtype(); },
        [](const auto& r) { return dtype_text(r.dtype()); }))
    return *e;
  if (auto e = mismatch(
        "groups",
        [](const auto& a, const auto& b) {
          return a.group_size() == b.group_size() && a.group_name() == b.group_name();
        },
        [](const auto& r) {
          return r.group_size() > 1 ? fmt::format("'{}' of {}", r.group_name(), r.group_size())
                                    : std::string("no group");
        }))
    return *e;
  const auto op = first.op();
  const bool someone_joined = std::any_of(by_rank.begin(), by_rank.end(),
                                          [](const auto& r) { return !r; });
  const auto& props = properties(op);
  if (someone_joined && props.join_conflict)
    return error_response(name, props.join_conflict);
  if (!agree(by_rank, first,
             [](const auto& a, const auto& b) { return a.device_kind() == b.device_kind(); }))
    if (auto diff = disagreement(by_rank, [](const auto& r) {
          return std::string(device_text(r.device_kind()));
        }))
      return error_response(
        name, fmt::format("Mismatched {} CPU/GPU device selection: One rank specified device "
                          "CPU, but another rank specified device GPU (tensor '{}': {}).",
                          op_text(op), name, *diff));
  if (props.reduces) {
    if (auto e = mismatch(
          "reduction operations",
          [](const auto& a, const auto& b) { return a.reduce_op() == b.reduce_op(); },
          [](const auto& r) { return reduce_text(r.reduce_op()); }))
      return *e;
    if (auto e = mismatch(
          "prescale and/or postscale factors",
          [](const auto& a, const auto& b) {
            return a.prescale_factor() == b.prescale_factor() &&
                   a.postscale_factor() == b.postscale_factor();
          },
          scale_text))
      return *e;
  }
  if (props.same_shape) {
    if (auto e = mismatch("tensor shapes", same_dims<0>, shape_text))
      return *e;
  }
  if (op == v1::OP_TYPE_BROADCAST) {
    if (auto e = mismatch(
          "root ranks", [](const auto& a, const auto& b) { return a.root_rank() == b.root_rank(); },
          [](const auto& r) { return std::to_string(r.root_rank()); }))
      return *e;
  }
  if (props.gathers) {
    if (auto e = mismatch(
          "tensor ranks (number of dimensions)",
          [](const auto& a, const auto& b) { return a.shape_size() == b.shape_size(); },
          [](const auto& r) { return std::to_string(r.shape_size()); }))
      return *e;
    // Not scalars: every request passed check_request in add().
    auto trailing = [](const v1::Request& r) {
      return to_string(shape_t(r.shape().begin() + 1, r.shape().end()));
    };
    if (auto e = mismatch("trailing dimensions (all but the first)", same_dims<1>, trailing))
      return *e;
  }
  return agreed_response(name, by_rank);
}

v1::Response agreed_response(const std::string& name,
                             const requests& by_rank) {
  const auto& first = **std::find_if(by_rank.begin(), by_rank.end(),
                                     [](const auto& r) { return r != nullptr; });
  if (first.op() != v1::OP_TYPE_ALLGATHER)
    return agreed_response_of(name, first);
  std::vector<int64_t> first_dims;
  first_dims.reserve(by_rank.size());
  for (const auto& r : by_rank)
    first_dims.push_back(r->shape(0));
  return agreed_allgather_of(name, first, first_dims);
}

message_table::message_table(int32_t set_size)
  : set_size_(set_size), joined_(static_cast<size_t>(set_size), false) {
}

std::optional<std::string> message_table::add(const v1::Request& request) {
  const auto first = request.request_rank();
  const int64_t end64 = ranks_end(request);
  if (first < 0 || end64 <= first || end64 > set_size_)
    return fmt::format("request for '{}' from {} outside the set of size {}",
                       request.tensor_name(), senders_text(first, end64), set_size_);
  const auto end = static_cast<int32_t>(end64);
  if (auto err = check_request(request); !err.empty())
    return reject(request, err, end);
  // The JOIN's own name: a tensor of that name would be taken for it. The
  // API refuses it; a request that gets here anyway fails on its senders
  // alone, as an ERROR naming the rank, so other ranks' join() stays
  // pending.
  if (request.op() != v1::OP_TYPE_JOIN && request.tensor_name() == join_name) {
    const auto why = fmt::format("{} of '{}' from {}: that name is reserved for join()",
                                 properties(request.op()).name, join_name,
                                 senders_text(first, end));
    for (auto r = first; r < end; ++r) {
      failed_.push_back(error_response(join_name, why));
      failed_.back().mutable_error()->set_code(v1::ERROR_CODE_INVALID_ARGUMENT);
      failed_.back().set_only_rank(r);
    }
    return why;
  }
  if (request.op() == v1::OP_TYPE_JOIN) {
    std::optional<std::string> err;
    for (auto r = first; r < end; ++r)
      if (auto e = join(r))
        err = e;
    return err;
  }
  // One object for the whole range: a merged range costs one copy.
  request_ptr shared;
  return for_each_run(request.tensor_name(), first, end, [&](int32_t from, int32_t to) {
    if (!shared)
      shared = std::make_shared<const v1::Request>(request);
    return record_requests(from, to, shared);
  });
}

template <class Record>
std::optional<std::string> message_table::for_each_run(const std::string& name, int32_t first,
                                                       int32_t end, Record record) {
  if (tombstones_.empty())
    return record(first, end);
  // Ranks that still owe a failed round of this name get its error instead.
  std::optional<std::string> err;
  int32_t run = first;
  for (int32_t r = first; r <= end; ++r) {
    if (r < end && !answer_late(name, r))
      continue;
    if (run < r)
      if (auto e = record(run, r))
        err = e;
    run = r + 1;
  }
  return err;
}

std::optional<std::string> message_table::record_requests(int32_t first, int32_t end,
                                                          const request_ptr& request) {
  const auto& name = request->tensor_name();
  auto& e = open(name, *request);
  if (auto err = mark_asked(name, e, first, end))
    return err;
  materialize(e);
  std::fill(e.by_rank.begin() + first, e.by_rank.begin() + end, request);
  // A joined rank's request can complete a tensor released without it:
  // released once only (found by fuzz/control_messages_fuzzer).
  if (!e.released && is_ready(e))
    release(name, e);
  return std::nullopt;
}

std::optional<std::string> message_table::add_hits(int32_t first, int32_t end,
                                                   const cached_tensor_ptr& tensor) {
  if (first < 0 || end <= first || end > set_size_ ||
      static_cast<size_t>(set_size_) != tensor->by_rank.size())
    return fmt::format("cache hit for '{}' from set ranks [{}, {}) outside the set of size {}",
                       tensor->name, first, end, set_size_);
  return for_each_run(tensor->name, first, end,
                      [&](int32_t from, int32_t to) { return record_hits(from, to, tensor); });
}

std::optional<std::string> message_table::record_hits(int32_t first, int32_t end,
                                                      const cached_tensor_ptr& tensor) {
  const auto& name = tensor->name;
  // Only the first member's request is read here: the others' sit in
  // memory a hit need not touch (one cache miss each at scale).
  auto& e = open(name, *tensor->by_rank.front());
  if (auto err = mark_asked(name, e, first, end))
    return err;
  if (e.by_rank.empty() && (!e.cached || e.cached == tensor)) {
    e.cached = tensor;
  } else {
    // Members named different versions, or sent requests: check them all.
    materialize(e);
    std::copy(tensor->by_rank.begin() + first, tensor->by_rank.begin() + end,
              e.by_rank.begin() + first);
  }
  if (!e.released && is_ready(e))
    release(name, e);
  return std::nullopt;
}

message_table::entry& message_table::open(const std::string& name, const v1::Request& first) {
  auto [it, inserted] = entries_.try_emplace(name);
  auto& e = it->second;
  if (inserted) {
    e.asked.resize(static_cast<size_t>(set_size_));
    e.first_seen = clock::now();
    e.group = first.group_size() > 1 ? first.group_name() : std::string();
    if (first.deadline_ms() > 0) {
      e.deadline = e.first_seen + std::chrono::milliseconds(first.deadline_ms());
      ++with_deadline_;
    }
  }
  return e;
}

std::optional<std::string> message_table::mark_asked(const std::string& name, entry& e,
                                                     int32_t first, int32_t end) {
  const auto from = e.asked.begin() + first, to = e.asked.begin() + end;
  if (auto twice = std::find(from, to, true); twice != to)
    return fmt::format("rank {} requested '{}' twice before it completed",
                       twice - e.asked.begin(), name);
  std::fill(from, to, true);
  e.asked_count += end - first;
  return std::nullopt;
}

void message_table::materialize(entry& e) const {
  if (!e.by_rank.empty())
    return;
  e.by_rank.resize(static_cast<size_t>(set_size_));
  if (!e.cached)
    return;
  for (size_t r = 0; r < e.by_rank.size(); ++r)
    if (e.asked[r])
      e.by_rank[r] = e.cached->by_rank[r];
  e.cached.reset();
}

const v1::Request& message_table::representative(const entry& e) const {
  const auto& by_rank = e.cached ? e.cached->by_rank : e.by_rank;
  return **std::find_if(by_rank.begin(), by_rank.end(),
                        [](const auto& r) { return r != nullptr; });
}

bool message_table::is_ready(const entry& e) const {
  if (joined_count_ == 0)
    return e.asked_count == set_size_;
  for (size_t r = 0; r < e.asked.size(); ++r)
    if (!e.asked[r] && !joined_[r])
      return false;
  return true;
}

std::vector<int32_t> message_table::missing(const entry& e) const {
  std::vector<int32_t> out;
  for (size_t r = 0; r < e.asked.size(); ++r)
    if (!e.asked[r] && !joined_[r])
      out.push_back(static_cast<int32_t>(r));
  return out;
}

std::optional<std::string> message_table::join(int32_t rank) {
  if (joined_[static_cast<size_t>(rank)])
    return fmt::format("rank {} joined twice", rank);
  joined_[static_cast<size_t>(rank)] = true;
  ++joined_count_;
  last_joined_ = rank;
  // Tensors that only this rank was missing can run now, in arrival order,
  // and before the JOIN if this rank joined last: the JOIN ends the round in
  // which joined ranks stand in with zeros.
  std::vector<std::pair<clock::time_point, std::string>> newly;
  for (auto& [name, e] : entries_)
    if (!e.released && is_ready(e))
      newly.emplace_back(e.first_seen, name);
  std::sort(newly.begin(), newly.end());
  for (const auto& n : newly)
    release(n.second, entries_.at(n.second));
  if (joined_count_ == set_size_)
    ready_.push_back(join_name);
  return std::nullopt;
}

void message_table::release(const std::string& name, entry& e) {
  e.released = true;
  const auto& first = representative(e);
  // One cached tensor named by every member agreed on its group when cached.
  const bool agreed = std::all_of(e.by_rank.begin(), e.by_rank.end(), [&](const auto& r) {
    return !r || r.get() == &first ||
           (r->group_name() == first.group_name() && r->group_size() == first.group_size());
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

v1::Response message_table::pop_ready(sent* out, std::string* group) {
  auto name = std::move(ready_.front());
  ready_.pop_front();
  if (group)
    group->clear();
  if (name == join_name && !entries_.count(name)) {
    // Every rank joined: join() returns everywhere, and a new round begins.
    v1::Response resp;
    resp.set_op(v1::OP_TYPE_JOIN);
    resp.add_tensor_names(join_name);
    resp.set_last_joined_rank(last_joined_);
    std::fill(joined_.begin(), joined_.end(), false);
    joined_count_ = 0;
    if (out)
      *out = {};
    return resp;
  }
  auto node = entries_.extract(name);
  auto& e = node.mapped();
  with_deadline_ -= e.deadline ? 1 : 0;
  if (group)
    *group = e.group;
  if (e.cached && e.asked_count == set_size_) {
    auto resp = agreed_response(name, e.cached->by_rank);
    if (out)
      *out = {std::move(e.cached), {}};
    return resp;
  }
  materialize(e);
  auto resp = make_response(name, e.by_rank);
  if (out)
    *out = {nullptr, std::move(e.by_rank)};
  return resp;
}

void message_table::fail_entry(const std::string& name, v1::ErrorCode code,
                               const std::string& why) {
  auto node = entries_.extract(name);
  with_deadline_ -= node.mapped().deadline ? 1 : 0;
  // A released tensor may wait in ready_ or be held for its group (a peer's
  // malformed request for a name that is ready but not yet sent): it fails
  // instead, so it must not be popped as well (found by
  // fuzz/control_messages_fuzzer).
  if (node.mapped().released) {
    ready_.erase(std::remove(ready_.begin(), ready_.end(), name), ready_.end());
    for (auto& [group, members] : waiting_groups_)
      members.erase(std::remove(members.begin(), members.end(), name), members.end());
  }
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

std::string message_table::reject(const v1::Request& request, const std::string& err,
                                  int32_t end) {
  const auto& name = request.tensor_name();
  const auto first = request.request_rank();
  const auto why = fmt::format("{} sent an invalid request: {}", senders_text(first, end), err);
  if (entries_.count(name)) {
    abandon(name, v1::ERROR_CODE_INVALID_ARGUMENT, why);
    // The ranks that sent it have had their answer: they owe nothing.
    if (auto t = tombstones_.find(name); t != tombstones_.end())
      std::fill(t->second.owed.begin() + first, t->second.owed.begin() + end, false);
  } else {
    auto resp = error_response(name, why);
    resp.mutable_error()->set_code(v1::ERROR_CODE_INVALID_ARGUMENT);
    failed_.push_back(std::move(resp));
  }
  return why;
}

bool message_table::answer_late(const std::string& name, int32_t rank) {
  if (tombstones_.empty())
    return false;
  auto it = tombstones_.find(name);
  if (it == tombstones_.end())
    return false;
  auto& t = it->second;
  auto owed = t.owed.begin() + rank;
  if (!*owed)
    return false;  // a new round of a name that failed before
  *owed = false;
  failed_.push_back(t.error);
  failed_.back().set_only_rank(rank);
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
  if (with_deadline_ == 0)
    return out;
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

std::vector<std::string> message_table::pending_names() const {
  std::vector<std::string> names;
  for (const auto& [name, e] : entries_)
    if (!e.released)
      names.push_back(name);
  return names;
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
