#include "coordinator/request_intake.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "coordinator/response_cache.hpp"
#include "proto/op_properties.hpp"
#include "proto/request_parameters.hpp"

namespace troupe::coordinator {

namespace {

bool cacheable(const v1::Response& resp, const message_table::sent& sent) {
  // A joined rank has no request of its own to send as a cache hit.
  return properties(resp.op()).cacheable &&
         (sent.cached || std::all_of(sent.by_rank.begin(), sent.by_rank.end(),
                                     [](const auto& r) { return r != nullptr; }));
}

} // namespace

std::vector<std::string> take_requests(const v1::RequestList& list, message_table& table,
                                       response_cache& cache) {
  std::vector<std::string> ignored;
  // A list speaks for the set ranks [sender_rank, ranks_end) (a member: its
  // own; a control-tree node: its subtree's); none of its requests for
  // others.
  const int64_t list_first = list.sender_rank();
  const int64_t list_end = list.ranks_end() > 0 ? list.ranks_end() : INT64_MAX;
  for (const auto& req : list.requests()) {
    if (list.ranks_end() > 0 &&
        (req.request_rank() < list_first || ranks_end(req) > list_end)) {
      ignored.push_back(fmt::format("the list of set ranks [{}, {}) carried a request for '{}' "
                                    "from set ranks [{}, {})",
                                    list_first, list_end, req.tensor_name(), req.request_rank(),
                                    ranks_end(req)));
      continue;
    }
    if (req.cache_id() == 0) {
      if (auto err = table.add(req))
        ignored.push_back(std::move(*err));
      continue;
    }
    const auto first = req.request_rank();
    const auto end = static_cast<int32_t>(std::min<int64_t>(ranks_end(req), INT32_MAX));
    const auto state = req.cache_list() > 0 ? req.cache_list() : list.lists_applied();
    auto cached = cache.resolve(req.cache_id(), first, state);
    if (!cached) {
      ignored.push_back(fmt::format("rank {} sent unknown cache id {} (state after list {})",
                                    first, req.cache_id(), state));
      continue;
    }
    if (auto err = table.add_hits(first, end, cached))
      ignored.push_back(std::move(*err));
  }
  if (list.ranks_end() > 0)
    cache.member_progress(list.sender_rank(), list.ranks_end(), list.lists_applied());
  else if (list.requests_size() > 0)
    cache.member_progress(list.requests(0).request_rank(),
                          int64_t{list.requests(0).request_rank()} + 1, list.lists_applied());
  return ignored;
}

void record_outcome(v1::ResponseList& list,
                    std::unordered_map<std::string, message_table::sent>& sent,
                    response_cache& cache, uint64_t seq) {
  for (auto& resp : *list.mutable_responses()) {
    for (const auto& name : resp.tensor_names()) {
      if (resp.op() == v1::OP_TYPE_ERROR) {
        cache.erase(name, seq);
        continue;
      }
      auto it = sent.find(name);
      uint32_t id = 0;
      if (it != sent.end() && cacheable(resp, it->second))
        id = it->second.cached ? cache.touch(it->second.cached, seq)
                               : cache.put(name, std::move(it->second.by_rank), seq);
      resp.add_cache_ids(id);
    }
  }
}

} // namespace troupe::coordinator
