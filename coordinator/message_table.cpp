#include "coordinator/message_table.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "troupe/types.hpp"

namespace troupe::coordinator {

namespace {

std::string shape_text(const v1::Request& r) {
  return to_string(shape_t(r.shape().begin(), r.shape().end()));
}

std::string op_text(v1::OpType op) {
  // OP_TYPE_ALLREDUCE -> ALLREDUCE, Horovod's spelling.
  return v1::OpType_Name(op).substr(8);
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
  const auto& first = *by_rank.front();
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
  const bool reduces = op == v1::OP_TYPE_ALLREDUCE || op == v1::OP_TYPE_REDUCESCATTER;
  const bool gathers = op == v1::OP_TYPE_ALLGATHER || op == v1::OP_TYPE_ALLTOALL;
  if (reduces) {
    if (auto e = mismatch("reduction operations",
                          [](const auto& r) { return reduce_text(r.reduce_op()); }))
      return *e;
    if (auto e = mismatch("prescale and/or postscale factors", scale_text))
      return *e;
  }
  if (reduces || op == v1::OP_TYPE_BROADCAST) {
    if (auto e = mismatch("tensor shapes", shape_text))
      return *e;
  }
  if (op == v1::OP_TYPE_REDUCESCATTER) {
    if (first.reduce_op() != v1::REDUCE_OP_SUM && first.reduce_op() != v1::REDUCE_OP_AVERAGE)
      return error_response(name, fmt::format("Reducescatter of tensor '{}': Reducescatter "
                                              "currently only supports AVERAGE and SUM.",
                                              name));
    if (first.shape_size() == 0)
      return error_response(name, fmt::format("Reducescatter of tensor '{}': Reducescatter "
                                              "does not support scalar inputs.",
                                              name));
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
    if (first.shape_size() == 0)
      return error_response(name, fmt::format("Cannot {} scalar tensor '{}': it needs at "
                                              "least one dimension.",
                                              op_text(op), name));
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
  if (op == v1::OP_TYPE_ALLGATHER)
    for (const auto& r : by_rank)
      resp.add_tensor_sizes(r->shape(0));
  return resp;
}

message_table::message_table(int32_t set_size) : set_size_(set_size) {
}

std::optional<std::string> message_table::add(const v1::Request& request) {
  const auto rank = request.request_rank();
  if (rank < 0 || rank >= set_size_)
    return fmt::format("request for '{}' from rank {} outside the set of size {}",
                       request.tensor_name(), rank, set_size_);
  auto [it, inserted] = entries_.try_emplace(request.tensor_name());
  auto& e = it->second;
  if (inserted) {
    e.by_rank.resize(static_cast<size_t>(set_size_));
    e.first_seen = clock::now();
  }
  auto& slot = e.by_rank[static_cast<size_t>(rank)];
  if (slot)
    return fmt::format("rank {} requested '{}' twice before it completed", rank,
                       request.tensor_name());
  slot = request;
  if (++e.count == set_size_)
    release(request.tensor_name(), e);
  return std::nullopt;
}

void message_table::release(const std::string& name, const entry& e) {
  const auto& first = *e.by_rank.front();
  const bool agreed = std::all_of(e.by_rank.begin(), e.by_rank.end(), [&](const auto& r) {
    return r->group_name() == first.group_name() && r->group_size() == first.group_size();
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

v1::Response message_table::pop_ready() {
  auto name = std::move(ready_.front());
  ready_.pop_front();
  auto node = entries_.extract(name);
  return make_response(name, node.mapped().by_rank);
}

std::vector<std::pair<std::string, std::vector<int32_t>>>
message_table::missing_ranks(clock::time_point older_than) const {
  std::vector<std::pair<std::string, std::vector<int32_t>>> out;
  for (const auto& [name, e] : entries_) {
    if (e.count == set_size_ || e.first_seen >= older_than)
      continue;
    std::vector<int32_t> missing;
    for (int32_t r = 0; r < set_size_; ++r)
      if (!e.by_rank[static_cast<size_t>(r)])
        missing.push_back(r);
    out.emplace_back(name, std::move(missing));
  }
  return out;
}

} // namespace troupe::coordinator
