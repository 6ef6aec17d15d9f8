#include "metrics/rank_metrics.hpp"

#include <gtest/gtest.h>

#include "actors/tensor_entry.hpp"
#include "metrics/bus_bytes.hpp"
#include "metrics/collective_metrics.hpp"
#include "metrics/registry.hpp"
#include "troupe/status.hpp"

namespace troupe::metrics {
namespace {

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
  e->handle = std::make_shared<detail::handle_state>();
  return e;
}

TEST(rank_metrics, executed_collectives_update_their_children) {
  auto reg = std::make_shared<registry>();
  rank_metrics m{reg, {1, 2, 1}, "gloo,mpi"};
  auto gloo = m.for_backend("gloo");
  std::vector<float> a(256), b(64);
  actors::collective_work fused;
  fused.response.set_op(v1::OP_TYPE_ALLREDUCE);
  fused.entries = {entry(a), entry(b)};
  gloo->executed(fused, {}, 0.002, 3);
  actors::collective_work failed;
  failed.response.set_op(v1::OP_TYPE_BROADCAST);
  failed.entries = {entry(b)};
  gloo->executed(failed, {status_code::backend, "peer gone"}, 0.5, 0);
  m.cycle();
  m.cache_hit();
  m.stall_check(2, true);
  m.mailbox_depth(actor_kind::negotiator, 7);
  const auto text = reg->expose();
  for (const char* line : {
         "troupe_build_info{version=\"" TROUPE_VERSION "\",backends=\"gloo,mpi\"} 1\n",
         "troupe_rank 1\n", "troupe_world_size 2\n", "troupe_local_rank 1\n",
         "troupe_collective_operations_total{op=\"allreduce\",backend=\"gloo\",status=\"ok\"} 1\n",
         "troupe_collective_tensors_total{op=\"allreduce\",backend=\"gloo\",status=\"ok\"} 2\n",
         "troupe_collective_bytes_total{op=\"allreduce\",backend=\"gloo\",status=\"ok\"} 1280\n",
         "troupe_collective_bus_bytes_total{op=\"allreduce\",backend=\"gloo\",status=\"ok\"} 1280\n",
         "troupe_collective_operations_total{op=\"broadcast\",backend=\"gloo\",status=\"error\"} 1\n",
         "troupe_collective_operations_total{op=\"broadcast\",backend=\"gloo\",status=\"ok\"} 0\n",
         "troupe_backend_errors_total{backend=\"gloo\",code=\"backend\"} 1\n",
         "troupe_fusion_batch_tensors_bucket{le=\"2\"} 1\n",
         "troupe_fusion_batch_bytes_sum 1280\n",
         "troupe_collective_duration_seconds_count{op=\"allreduce\"} 1\n",
         "troupe_cycles_total 1\n", "troupe_response_cache_hits_total 1\n",
         "troupe_response_cache_misses_total 0\n", "troupe_stalled_tensors 2\n",
         "troupe_stall_warnings_total 1\n",
         "troupe_actor_mailbox_depth{actor=\"negotiator\"} 7\n",
         "troupe_actor_mailbox_depth{actor=\"backend\"} 0\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line;
  // Labels are bounded: nothing names a tensor.
  EXPECT_EQ(text.find("tensor_name"), std::string::npos);
}

TEST(rank_metrics, one_registry_per_runtime_instance) {
  auto first = std::make_shared<registry>();
  rank_metrics a{first, {}, "gloo"};
  EXPECT_THROW(rank_metrics(first, {}, "gloo"), std::invalid_argument);
  rank_metrics b{std::make_shared<registry>(), {}, "gloo"};  // init() after shutdown()
}

} // namespace
} // namespace troupe::metrics
