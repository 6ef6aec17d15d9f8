// What the negotiator's tracers send the timeline for a backend activity.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/atoms.hpp"
#include "actors/timeline.hpp"
#include "actors/work_tracers.hpp"

namespace troupe::actors {
namespace {

struct edge {
  std::string tensor;
  std::string phase;
  std::string activity;
  int64_t ts_us;
};

collective_work work_of(const std::vector<std::string>& names) {
  collective_work work;
  for (const auto& name : names) {
    auto e = std::make_shared<tensor_entry>();
    e->request.set_tensor_name(name);
    work.entries.push_back(e);
  }
  return work;
}

std::vector<edge> receive(caf::scoped_actor& self, size_t n) {
  std::vector<edge> got;
  for (size_t i = 0; i < n; ++i)
    self->receive(
      [&](timeline_atom, const std::string& tensor, const std::string& phase,
          const std::string& activity, int64_t ts_us) {
        got.push_back({tensor, phase, activity, ts_us});
      },
      caf::after(std::chrono::seconds(5)) >> [&] { ADD_FAILURE() << "edge " << i << " missing"; });
  return got;
}

TEST(work_tracers, a_past_span_lands_its_offsets_before_now_on_every_tensors_row) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto work = work_of({"a", "b"});
  attach_tracers(caf::actor_cast<caf::actor>(self), work);
  ASSERT_TRUE(work.trace);
  ASSERT_TRUE(work.past_trace);

  const auto before = timeline_now_us();
  work.past_trace("MEMCPY_IN_FUSION_BUFFER", 3000, 1000);
  const auto after = timeline_now_us();
  const auto got = receive(self, 4);
  ASSERT_EQ(got.size(), 4u);
  // Begin edges on both rows, then end edges; CAF keeps one sender's order.
  EXPECT_EQ(got[0].tensor + got[0].phase + got[1].tensor + got[1].phase, "aBbB");
  EXPECT_EQ(got[2].tensor + got[2].phase + got[3].tensor + got[3].phase, "aEbE");
  for (const auto& e : got)
    EXPECT_EQ(e.activity, "MEMCPY_IN_FUSION_BUFFER");
  EXPECT_EQ(got[0].ts_us, got[1].ts_us);
  // The GPU's duration exactly, placed that far before the call.
  EXPECT_EQ(got[2].ts_us - got[0].ts_us, 2000);
  EXPECT_GE(got[0].ts_us, before - 3000);
  EXPECT_LE(got[0].ts_us, after - 3000);

  work.trace("NCCL_ALLREDUCE", 'E');
  const auto now = receive(self, 2);
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(now[0].phase, "E");
  EXPECT_GE(now[0].ts_us, after);
  EXPECT_LE(now[0].ts_us, timeline_now_us());
}

} // namespace
} // namespace troupe::actors
