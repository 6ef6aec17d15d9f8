// A negotiator and a real coordinator of one set together: a list's round
// trip, names reused after it, and messages of another membership epoch.
#include <gtest/gtest.h>

#include "protocol_harness.hpp"

namespace troupe::actors {
namespace {

using namespace protocol_test;

TEST_F(actor_protocol, a_response_list_reaches_the_negotiator_without_a_supervisor) {
  inbox cpu;
  auto coord = coordinator::spawn_coordinator(sys_, 0, 1, {{false, 0, 0}, 0, 4, {}}, metrics_);
  spawned_.push_back(caf::actor_cast<caf::actor>(coord));
  auto neg = negotiator(coord, coord, backend(cpu, 8));
  std::vector<float> x(2, 1.0f);
  auto e = entry("direct", x);
  submit_batch(neg, entry_batch{e});
  sched_.run();
  ASSERT_EQ(cpu.works.size(), 1u);
  ASSERT_TRUE(e->handle->done());
  EXPECT_TRUE(e->handle->result().ok());
  // The executed list reached the coordinator: the next one goes out too.
  auto e2 = entry("direct.2", x);
  submit_batch(neg, entry_batch{e2});
  sched_.run();
  ASSERT_TRUE(e2->handle->done());
  EXPECT_TRUE(e2->handle->result().ok());
}

// The backend completes a successful work's handles itself, before its
// (executed) reaches the negotiator: the caller may reuse the name at once,
// and the late (executed) of the old work leaves the new entry alone.
TEST_F(actor_protocol, a_name_is_free_again_once_its_handle_completed) {
  inbox cpu;
  auto coord = coordinator::spawn_coordinator(sys_, 0, 1, {{false, 0, 0}, 0, 4, {}}, metrics_);
  spawned_.push_back(caf::actor_cast<caf::actor>(coord));
  auto neg = negotiator(coord, coord, backend(cpu, 8, false));
  std::vector<float> x(2, 1.0f);
  auto first = entry("again", x);
  submit_batch(neg, entry_batch{first});
  sched_.run();
  ASSERT_EQ(cpu.running.size(), 1u);
  // Still running: the name is taken.
  auto refused = entry("again", x);
  submit_batch(neg, entry_batch{refused});
  sched_.run();
  ASSERT_TRUE(refused->handle->done());
  EXPECT_NE(refused->handle->result().message().find("same name"), std::string::npos);
  // Finished, as the backend reports it to the caller, (executed) not yet
  // delivered: the name is free.
  first->handle->complete({});
  auto second = entry("again", x);
  submit_batch(neg, entry_batch{second});
  sched_.run();
  EXPECT_FALSE(second->handle->done());
  caf::anon_send(neg, executed_atom::value, cpu.works[0]->id, status{}, list_stats{});
  sched_.run();
  EXPECT_FALSE(second->handle->done()) << "the old work's (executed) completed the new entry";
  ASSERT_EQ(cpu.works.size(), 2u);  // the new one was negotiated and runs
  caf::anon_send(neg, executed_atom::value, cpu.works[1]->id, status{}, list_stats{});
  sched_.run();
  ASSERT_TRUE(second->handle->done());
  EXPECT_TRUE(second->handle->result().ok());
}

TEST_F(actor_protocol, messages_from_another_membership_epoch_are_refused) {
  inbox rank0, rank1, cpu;
  coordinator::coordinator_options o{{}, 0, 4, {}};
  o.epoch = 3;
  auto coord = coordinator({fake<member_actor>(rank0), fake<member_actor>(rank1)}, o);
  for (int r = 0; r < 2; ++r)
    caf::anon_send(coord, request_atom::value, int64_t{2}, 0u, request_list({request(r, "a")}));
  sched_.run();
  EXPECT_TRUE(rank0.responses.empty());
  auto neg = spawn_negotiator(sys_, args(3), {},
                              {{device_kind::cpu, backend(cpu)}}, caf::actor{});
  spawned_.push_back(caf::actor_cast<caf::actor>(neg));
  std::vector<float> x(2);
  auto e = entry("a", x);
  submit_batch(neg, entry_batch{e});
  caf::anon_send(neg, response_atom::value, int64_t{2}, 0u, response_on("a", v1::DEVICE_KIND_CPU));
  sched_.run();
  EXPECT_TRUE(cpu.works.empty());
  EXPECT_FALSE(e->handle->done());
}

} // namespace
} // namespace troupe::actors
