// The API's way into a negotiator, its submission inbox: what a burst sends
// and what a stopped negotiator leaves in it.
#include <gtest/gtest.h>

#include "protocol_harness.hpp"

namespace troupe::actors {
namespace {

using namespace protocol_test;

// The API's path: callers append to the negotiator's inbox and only the
// first append of a burst sends (submit); the burst goes up as one list,
// in submission order.
TEST_F(actor_protocol, a_burst_through_the_inbox_goes_up_in_one_list) {
  inbox endpoint, backend_box;
  const auto entrance = entrance_told(fake<coordinator_actor>(endpoint), backend(backend_box));
  const auto& neg = entrance.negotiator;
  std::vector<float> x(4, 1.0f);
  std::vector<tensor_entry_ptr> burst;
  for (const auto* name : {"a", "b", "c"}) {
    burst.push_back(entry(name, x));
    submit_batch(entrance, entry_batch{burst.back()});
  }
  auto* actor = dynamic_cast<caf::scheduled_actor*>(caf::actor_cast<caf::abstract_actor*>(neg));
  ASSERT_NE(actor, nullptr);
  EXPECT_EQ(actor->mailbox().size(), 1u);  // one message for the three
  sched_.run();
  ASSERT_EQ(endpoint.requests.size(), 1u);
  v1::RequestList sent;
  ASSERT_TRUE(sent.ParseFromString(endpoint.requests[0]));
  ASSERT_EQ(sent.requests_size(), 3);
  EXPECT_EQ(sent.requests(0).tensor_name(), "a");
  EXPECT_EQ(sent.requests(1).tensor_name(), "b");
  EXPECT_EQ(sent.requests(2).tensor_name(), "c");
  // Taken: the next submission tells the negotiator again. A name still
  // pending is refused as before.
  auto d = entry("d", x);
  auto again = entry("a", x);
  submit_batch(entrance, entry_batch{d});
  submit_batch(entrance, entry_batch{again});
  sched_.run();
  ASSERT_EQ(endpoint.requests.size(), 2u);
  ASSERT_TRUE(sent.ParseFromString(endpoint.requests[1]));
  ASSERT_EQ(sent.requests_size(), 1);
  EXPECT_EQ(sent.requests(0).tensor_name(), "d");
  ASSERT_TRUE(again->handle->done());
  EXPECT_EQ(again->handle->result().code(), status_code::invalid_argument);
  for (const auto& e : burst)
    EXPECT_FALSE(e->handle->done());
}

// What is still in the inbox when the negotiator stops, and what comes
// after, fails with the shutdown status instead of waiting forever.
TEST_F(actor_protocol, the_inbox_fails_what_a_stopped_negotiator_never_took) {
  inbox endpoint, backend_box;
  const auto entrance = entrance_told(fake<coordinator_actor>(endpoint), backend(backend_box));
  std::vector<float> x(1);
  caf::anon_send(entrance.negotiator, shutdown_atom::value);
  auto queued = entry("queued", x);
  submit_batch(entrance, entry_batch{queued});  // behind the shutdown
  EXPECT_FALSE(queued->handle->done());
  sched_.run();
  ASSERT_TRUE(queued->handle->done());
  EXPECT_EQ(queued->handle->result().code(), status_code::shut_down);
  EXPECT_TRUE(endpoint.requests.empty());
  auto late = entry("late", x);
  EXPECT_EQ(entrance.inbox->put(entry_batch{late}), submission_inbox::put_result::closed);
  ASSERT_TRUE(late->handle->done());
  EXPECT_EQ(late->handle->result().code(), status_code::shut_down);
}

} // namespace
} // namespace troupe::actors
