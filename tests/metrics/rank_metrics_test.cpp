#include "metrics/rank_metrics.hpp"

#include <gtest/gtest.h>

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "actors/tensor_entry.hpp"
#include "metrics/autotune_metrics.hpp"
#include "metrics/bus_bytes.hpp"
#include "troupe/status.hpp"

namespace troupe::metrics {
namespace {

std::string expose(const rank_metrics& m) {
  return prometheus::TextSerializer{}.Serialize(m.registry()->Collect());
}

TEST(bus_bytes, follows_nccl_tests) {
  EXPECT_EQ(bus_bytes(v1::OP_TYPE_ALLREDUCE, 1000, 4), 1500u);   // 2*3/4
  EXPECT_EQ(bus_bytes(v1::OP_TYPE_ALLGATHER, 1000, 4), 750u);    // 3/4
  EXPECT_EQ(bus_bytes(v1::OP_TYPE_REDUCESCATTER, 1000, 4), 750u);
  EXPECT_EQ(bus_bytes(v1::OP_TYPE_ALLTOALL, 1000, 4), 750u);
  EXPECT_EQ(bus_bytes(v1::OP_TYPE_BROADCAST, 1000, 4), 1000u);
  EXPECT_EQ(bus_bytes(v1::OP_TYPE_BARRIER, 1000, 4), 0u);
  EXPECT_EQ(bus_bytes(v1::OP_TYPE_ALLREDUCE, 1000, 1), 0u);      // nothing crosses a link
}

actors::tensor_entry_ptr entry(std::vector<float>& data) {
  auto e = std::make_shared<actors::tensor_entry>();
  e->input = {data.data(), data_type::float32, {static_cast<int64_t>(data.size())}};
  return e;
}

actors::collective_work work(v1::OpType op, std::vector<actors::tensor_entry_ptr> entries) {
  actors::collective_work w;
  w.response.set_op(op);
  w.entries = std::move(entries);
  return w;
}

// What the backend actor reports once `w` has run.
void report(collective_metrics& c, const actors::collective_work& w, const status& result,
            double seconds, size_t queued) {
  c.executed(w, result, actors::payload_bytes(w), seconds, queued);
}

void expect_lines(const std::string& text, std::initializer_list<const char*> lines) {
  for (const char* line : lines)
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin\n" << text;
}

TEST(rank_metrics, executed_collectives_update_their_sets_children) {
  rank_metrics m{{1, 2, 1}, "gloo,mpi"};
  auto global = m.for_set(0, 2, "gloo");
  std::vector<float> a(256), b(64);
  report(global->collectives(), work(v1::OP_TYPE_ALLREDUCE, {entry(a), entry(b)}), {}, 0.002,
                                 3);
  report(global->collectives(), work(v1::OP_TYPE_BROADCAST, {entry(b)}),
                                 {status_code::backend, "peer gone"}, 0.5, 0);
  global->cycle();
  global->cache_hit();
  global->tree_hits(3, 1);
  global->tree_requests(5, 2);
  global->tree_hold_expired(1, 3);
  global->stall_check(2, true);
  global->queue_depth(5);
  global->mailbox_depth(actor_kind::negotiator, 7);
  m.supervisor_mailbox_depth(4);
  expect_lines(
    expose(m),
    {"troupe_build_info{backends=\"gloo,mpi\",version=\"" TROUPE_VERSION "\"} 1\n",
     "troupe_rank 1\n", "troupe_world_size 2\n", "troupe_local_rank 1\n",
     "troupe_collective_operations_total{backend=\"gloo\",op=\"allreduce\",process_set=\"0\","
     "status=\"ok\"} 1\n",
     "troupe_collective_tensors_total{backend=\"gloo\",op=\"allreduce\",process_set=\"0\","
     "status=\"ok\"} 2\n",
     "troupe_collective_bytes_total{backend=\"gloo\",op=\"allreduce\",process_set=\"0\","
     "status=\"ok\"} 1280\n",
     "troupe_collective_bus_bytes_total{backend=\"gloo\",op=\"allreduce\",process_set=\"0\","
     "status=\"ok\"} 1280\n",
     "troupe_collective_operations_total{backend=\"gloo\",op=\"broadcast\",process_set=\"0\","
     "status=\"error\"} 1\n",
     "troupe_collective_operations_total{backend=\"gloo\",op=\"broadcast\",process_set=\"0\","
     "status=\"ok\"} 0\n",
     "troupe_backend_errors_total{backend=\"gloo\",code=\"backend\",process_set=\"0\"} 1\n",
     "troupe_fusion_batch_tensors_bucket{process_set=\"0\",le=\"2\"} 1\n",
     "troupe_fusion_batch_bytes_sum{process_set=\"0\"} 1280\n",
     "troupe_collective_duration_seconds_count{op=\"allreduce\",process_set=\"0\"} 1\n",
     "troupe_cycles_total{process_set=\"0\"} 1\n",
     "troupe_response_cache_hits_total{process_set=\"0\"} 1\n",
     "troupe_response_cache_misses_total{process_set=\"0\"} 0\n",
     "troupe_control_tree_hits_total{how=\"aggregated\",process_set=\"0\"} 3\n",
     "troupe_control_tree_hits_total{how=\"passed\",process_set=\"0\"} 1\n",
     "troupe_control_tree_requests_total{how=\"merged\",process_set=\"0\"} 5\n",
     "troupe_control_tree_requests_total{how=\"passed\",process_set=\"0\"} 2\n",
     "troupe_control_tree_hold_expired_total{process_set=\"0\",what=\"hits\"} 1\n",
     "troupe_control_tree_hold_expired_total{process_set=\"0\",what=\"requests\"} 3\n",
     "troupe_stalled_tensors{process_set=\"0\"} 2\n",
     "troupe_stall_warnings_total{process_set=\"0\"} 1\n",
     "troupe_tensor_queue_depth{process_set=\"0\"} 5\n",
     "troupe_actor_mailbox_depth{actor=\"negotiator\",process_set=\"0\"} 7\n",
     "troupe_actor_mailbox_depth{actor=\"backend\",process_set=\"0\"} 0\n",
     "troupe_actor_mailbox_depth{actor=\"supervisor\"} 4\n"});
}

TEST(rank_metrics, autotune_series_per_set_leave_with_the_tuner) {
  rank_metrics m{{0, 2, 0}, "gloo"};
  auto tuner = m.for_autotune(2);
  tuner->settings(65536, 1.5, false, 1 << 20, true);
  tuner->sampled();
  tuner->sampled();
  tuner->scored(2.5e9, 3e9);
  tuner->optimizer_time(0.25);
  expect_lines(expose(m), {"troupe_autotune_active{process_set=\"2\"} 1\n",
                           "troupe_autotune_fusion_threshold_bytes{process_set=\"2\"} 65536\n",
                           "troupe_autotune_cycle_time_seconds{process_set=\"2\"} 0.0015\n",
                           "troupe_autotune_cache_enabled{process_set=\"2\"} 0\n",
                           "troupe_autotune_fusion_chunk_bytes{process_set=\"2\"} 1048576\n",
                           "troupe_autotune_samples_total{process_set=\"2\"} 2\n",
                           "troupe_autotune_score_bytes_per_second{process_set=\"2\"} 2500000000\n",
                           "troupe_autotune_best_score_bytes_per_second{process_set=\"2\"} "
                           "3000000000\n",
                           "troupe_autotune_optimizer_seconds_total{process_set=\"2\"} 0.25\n"});
  tuner->settings(65536, 1.5, false, 1 << 20, false);
  expect_lines(expose(m), {"troupe_autotune_active{process_set=\"2\"} 0\n"});
  tuner.reset();
  EXPECT_EQ(expose(m).find("process_set=\"2\""), std::string::npos);
}

TEST(rank_metrics, a_reset_moves_the_position_gauges) {
  rank_metrics m{{2, 3, 2}, "gloo"};
  expect_lines(expose(m), {"troupe_rank 2\n", "troupe_world_size 3\n",
                           "troupe_membership_epoch 0\n"});
  m.position({1, 2, 1}, 4);  // rank 0 was lost: this one is rank 1 of 2 now
  expect_lines(expose(m), {"troupe_rank 1\n", "troupe_world_size 2\n", "troupe_local_rank 1\n",
                           "troupe_membership_epoch 4\n"});
}

TEST(rank_metrics, the_control_links_are_a_gauge) {
  rank_metrics m{{0, 1, 0}, "gloo"};
  expect_lines(expose(m), {"troupe_control_links 0\n"});  // a job of one
  m.control_links(17);
  expect_lines(expose(m), {"troupe_control_links 17\n"});
}

// Every reason and outcome is there from the start (absent-series alerts
// work), and a reset counts under its reason and its outcome apart.
TEST(rank_metrics, resets_count_by_reason_and_time_by_outcome) {
  rank_metrics m{{0, 2, 0}, "gloo"};
  expect_lines(expose(m), {"troupe_resets_total{reason=\"peer_lost\"} 0\n",
                           "troupe_resets_total{reason=\"hosts_updated\"} 0\n",
                           "troupe_resets_total{reason=\"requested\"} 0\n",
                           "troupe_reset_duration_seconds_count{outcome=\"removed\"} 0\n",
                           "troupe_rendezvous_duration_seconds_count 0\n"});
  m.resets().rendezvous(0.2);
  m.resets().reset(reset_reason::peer_lost, reset_outcome::ok, 0.07);
  m.resets().reset(reset_reason::peer_lost, reset_outcome::failed, 3);
  m.resets().reset(reset_reason::hosts_updated, reset_outcome::ok, 0.3);
  expect_lines(expose(m), {"troupe_resets_total{reason=\"peer_lost\"} 2\n",
                           "troupe_resets_total{reason=\"hosts_updated\"} 1\n",
                           "troupe_resets_total{reason=\"requested\"} 0\n",
                           "troupe_reset_duration_seconds_count{outcome=\"ok\"} 2\n",
                           "troupe_reset_duration_seconds_bucket{outcome=\"ok\",le=\"0.1\"} 1\n",
                           "troupe_reset_duration_seconds_sum{outcome=\"failed\"} 3\n",
                           "troupe_rendezvous_duration_seconds_bucket{le=\"0.25\"} 1\n",
                           "troupe_rendezvous_duration_seconds_bucket{le=\"0.1\"} 0\n"});
}

// Bus bytes use the set's size, and two sets on one rank keep their own
// gauges instead of overwriting each other.
TEST(rank_metrics, sets_count_apart_with_their_own_bus_factor) {
  rank_metrics m{{0, 4, 0}, "gloo"};
  auto global = m.for_set(0, 4, "gloo");
  auto pair = m.for_set(1, 2, "gloo");
  std::vector<float> data(250);  // 1000 bytes
  report(global->collectives(), work(v1::OP_TYPE_ALLREDUCE, {entry(data)}), {}, 0.001, 0);
  report(pair->collectives(), work(v1::OP_TYPE_ALLREDUCE, {entry(data)}), {}, 0.001, 0);
  global->queue_depth(3);
  pair->queue_depth(1);
  expect_lines(
    expose(m),
    {"troupe_collective_bus_bytes_total{backend=\"gloo\",op=\"allreduce\",process_set=\"0\","
     "status=\"ok\"} 1500\n",  // 2*3/4
     "troupe_collective_bus_bytes_total{backend=\"gloo\",op=\"allreduce\",process_set=\"1\","
     "status=\"ok\"} 1000\n",  // 2*1/2
     "troupe_tensor_queue_depth{process_set=\"0\"} 3\n",
     "troupe_tensor_queue_depth{process_set=\"1\"} 1\n"});
}

TEST(rank_metrics, a_removed_sets_series_leave_with_its_last_holder) {
  rank_metrics m{{0, 4, 0}, "gloo"};
  auto global = m.for_set(0, 4, "gloo");
  auto removed = m.for_set(1, 2, "gloo");
  auto backend_part = std::shared_ptr<collective_metrics>(removed, &removed->collectives());
  removed.reset();
  EXPECT_NE(expose(m).find("process_set=\"1\""), std::string::npos);
  // The id comes back while the removed set's backend actor winds down:
  // both share the children until both let go.
  auto reused = m.for_set(1, 3, "gloo");
  reused->cycle();
  backend_part.reset();
  EXPECT_NE(expose(m).find("troupe_cycles_total{process_set=\"1\"} 1\n"), std::string::npos);
  reused.reset();
  const auto text = expose(m);
  EXPECT_EQ(text.find("process_set=\"1\""), std::string::npos) << text;
  EXPECT_NE(text.find("troupe_cycles_total{process_set=\"0\"} 0\n"), std::string::npos);
  // Labels are bounded: nothing names a tensor.
  EXPECT_EQ(text.find("tensor_name"), std::string::npos);
}

} // namespace
} // namespace troupe::metrics
