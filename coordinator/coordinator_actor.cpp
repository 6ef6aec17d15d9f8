#include "coordinator/coordinator_actor.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/atoms.hpp"
#include "coordinator/fusion.hpp"
#include "coordinator/message_table.hpp"
#include "metrics/rank_metrics.hpp"

namespace troupe::coordinator {

namespace {

using namespace troupe::actors;

struct coordinator_state {
  uint32_t set_id = 0;
  std::vector<caf::actor> members;
  std::unique_ptr<message_table> table;
  std::unique_ptr<stall_inspector> stalls;
  // Errors decided outside readiness (stalled tensors), sent with the next list.
  std::vector<v1::Response> urgent;
  int64_t fusion_threshold = 0;
  // Response lists sent but not yet executed on this rank.
  int in_flight = 0;
  std::shared_ptr<metrics::rank_metrics> metrics;
  static constexpr const char* name = "troupe.coordinator";
};

using coordinator_actor = caf::stateful_actor<coordinator_state>;

void try_emit(coordinator_actor* self) {
  auto& st = self->state;
  if (st.in_flight > 0 || (!st.table->has_ready() && st.urgent.empty()))
    return;
  v1::ResponseList list;
  list.set_process_set_id(st.set_id);
  for (auto& resp : st.urgent)
    *list.add_responses() = std::move(resp);
  st.urgent.clear();
  std::vector<v1::Response> ready;
  while (st.table->has_ready())
    ready.push_back(st.table->pop_ready());
  for (auto& resp : fuse(std::move(ready), st.fusion_threshold))
    *list.add_responses() = std::move(resp);
  auto msg = caf::make_message(response_atom::value, st.set_id, list.SerializeAsString());
  for (const auto& member : st.members)
    self->send(member, msg);
  ++st.in_flight;
}

void on_requests(coordinator_actor* self, const std::string& bytes) {
  auto& st = self->state;
  v1::RequestList list;
  if (!list.ParseFromString(bytes)) {
    spdlog::error("coordinator of set {}: dropped a malformed request list ({} bytes)",
                  st.set_id, bytes.size());
    return;
  }
  for (const auto& req : list.requests())
    if (auto err = st.table->add(req))
      spdlog::error("coordinator of set {}: ignored {}", st.set_id, *err);
  st.metrics->mailbox_depth(metrics::actor_kind::coordinator, self->mailbox().size());
  try_emit(self);
}

void check_stalls(coordinator_actor* self) {
  auto& st = self->state;
  auto verdict = st.stalls->check(*st.table, message_table::clock::now());
  if (!verdict.warning.empty())
    spdlog::warn("{}", verdict.warning);
  st.metrics->stall_check(st.stalls->stalled_count(), !verdict.warning.empty());
  for (const auto& [name, missing] : verdict.to_fail) {
    std::string ranks;
    for (auto r : missing)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    const auto why = fmt::format(
      "Tensor '{}' stalled: ranks [{}] did not submit it within the stall shutdown time "
      "(TROUPE_STALL_SHUTDOWN_TIME_SECONDS). Shutting it down.",
      name, ranks);
    spdlog::error("{}", why);
    st.urgent.push_back(st.table->abandon(name, v1::ERROR_CODE_TIMEOUT, why));
  }
  try_emit(self);
  self->delayed_send(self, st.stalls->interval(), stall_atom::value);
}

caf::behavior coordinator(coordinator_actor* self, uint32_t set_id,
                          std::vector<caf::actor> members, stall_options stall,
                          int64_t fusion_threshold,
                          std::shared_ptr<metrics::rank_metrics> metrics) {
  auto& st = self->state;
  st.metrics = std::move(metrics);
  st.set_id = set_id;
  st.fusion_threshold = fusion_threshold;
  st.table = std::make_unique<message_table>(static_cast<int32_t>(members.size()));
  st.stalls = std::make_unique<stall_inspector>(stall);
  st.members = std::move(members);
  if (stall.enabled)
    self->delayed_send(self, st.stalls->interval(), stall_atom::value);
  return {
    [=](stall_atom) { check_stalls(self); },
    [=](request_atom, uint32_t, const std::string& bytes) { on_requests(self, bytes); },
    [=](executed_atom) {
      --self->state.in_flight;
      try_emit(self);
    },
  };
}

} // namespace

caf::actor spawn_coordinator(caf::actor_system& sys, uint32_t process_set_id,
                             std::vector<caf::actor> member_endpoints,
                             const stall_options& stall, int64_t fusion_threshold,
                             std::shared_ptr<metrics::rank_metrics> metrics) {
  return sys.spawn(coordinator, process_set_id, std::move(member_endpoints), stall,
                   fusion_threshold, std::move(metrics));
}

} // namespace troupe::coordinator
