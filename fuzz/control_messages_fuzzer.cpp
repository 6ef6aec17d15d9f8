// libFuzzer target: control messages from a peer as the coordinator and a
// member meet them. The bytes are a troupe.v1.RequestList for the
// coordinator (its response cache resolves cache ids, its message table
// validates and matches the requests, pops what is ready and expires
// deadlines) and, the same bytes, a ResponseList for a member's cache view.
// The first byte picks the process set's size. The same list also reaches
// a control-tree inner node (set rank 1 over [1, size), fanout 1: a chain)
// as if from its subtree, and what the node sends up (at once and after
// its hold) goes to a coordinator. Any input must leave every side
// consistent: no crash, no unbounded work.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "actors/cache_view.hpp"
#include "control/control_tree.hpp"
#include "control/hit_aggregator.hpp"
#include "coordinator/message_table.hpp"
#include "coordinator/request_intake.hpp"
#include "coordinator/response_cache.hpp"
#include "troupe/v1/control.pb.h"

#include <google/protobuf/stubs/logging.h>

namespace v1 = troupe::v1;

namespace {

void as_coordinator(int32_t set_size, const std::string& bytes) {
  v1::RequestList list;
  if (!list.ParseFromString(bytes))
    return;
  troupe::coordinator::message_table table{set_size};
  troupe::coordinator::response_cache cache{4, set_size};
  uint64_t lists = 0;
  // One request at a time, popping what is ready in between, so later ids
  // in the input can name tensors the earlier ones put in the cache.
  for (const auto& req : list.requests()) {
    v1::RequestList one = list;
    one.clear_requests();
    *one.add_requests() = req;
    troupe::coordinator::take_requests(one, table, cache);
    while (table.has_ready()) {
      troupe::coordinator::message_table::sent sent;
      auto resp = table.pop_ready(&sent);
      if (resp.op() == v1::OP_TYPE_ERROR || resp.tensor_names_size() != 1)
        continue;
      if (sent.cached)
        cache.touch(sent.cached, ++lists);
      else
        cache.put(resp.tensor_names(0), std::move(sent.by_rank), ++lists);
    }
  }
  const auto later = troupe::coordinator::message_table::clock::now() + std::chrono::hours(24 * 365);
  table.missing_ranks(later);
  table.expire(later);
  table.take_failed();
}

void as_inner_node(int32_t set_size, const std::string& bytes) {
  v1::RequestList list;
  if (set_size < 3 || !list.ParseFromString(bytes))
    return;
  using clock = troupe::control::hit_aggregator::clock;
  const auto node = troupe::control::control_tree_node(1, set_size, 1);
  static const std::string names[] = {"t0", "t1", "t2", "t3"};
  troupe::control::hit_aggregator agg(node, std::chrono::seconds(1),
                                      [](uint32_t id, uint64_t) -> const std::string* {
                                        if (id % 3 == 0)
                                          return nullptr;  // a tensor it cannot name
                                        return &names[id % 4];
                                      });
  troupe::coordinator::message_table table{set_size};
  troupe::coordinator::response_cache cache{4, set_size};
  const auto t = clock::now();
  // The list twice (a rank asking again), then the hold.
  agg.add(list, t);
  auto up = agg.take(t);
  agg.add(list, t);
  auto later = agg.take(t + std::chrono::seconds(2));
  for (auto* out : {&up, &later})
    if (*out)
      troupe::coordinator::take_requests(**out, table, cache);
  while (table.has_ready())
    table.pop_ready();
  agg.join_ended();
}

void as_member(const std::string& bytes) {
  v1::ResponseList list;
  if (!list.ParseFromString(bytes))
    return;
  const v1::Request mine;
  troupe::actors::cache_view view;
  view.apply(list, [&](const std::string&) { return &mine; });
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Parse failures (invalid UTF-8 in string fields) are expected here, and
  // protobuf's log line for each would slow the run down.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const int32_t set_size = 1 + data[0] % 8;
  const std::string bytes{reinterpret_cast<const char*>(data) + 1, size - 1};
  as_coordinator(set_size, bytes);
  as_inner_node(set_size, bytes);
  as_member(bytes);
  return 0;
}
