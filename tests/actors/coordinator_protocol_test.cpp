// The coordinator driven message by message with CAF's deterministic test
// scheduler: the lists it sends its members, and when.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/shm_channel.hpp"
#include "coordinator/tuner_actor.hpp"
#include "protocol_harness.hpp"

namespace troupe::actors {
namespace {

using namespace protocol_test;

// Set rank `member` reading the coordinator's control channel `name`: the
// lists its reader thread passes on.
class channel_listener {
public:
  channel_listener(const std::string& name, int member)
      : member_(control::channel_member::open(name, member)) {
    if (member_)
      member_->start([this](std::string list) {
        std::lock_guard<std::mutex> lock(mutex_);
        lists_.push_back(std::move(list));
      });
  }
  bool opened() const {
    return member_ != nullptr;
  }
  std::vector<std::string> lists() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lists_;
  }
  // The lists once there are `n` (or after 10 s), calling `meanwhile` every
  // millisecond until then.
  std::vector<std::string> await(size_t n, const std::function<void()>& meanwhile = [] {}) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (lists().size() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      meanwhile();
    }
    return lists();
  }

private:
  mutable std::mutex mutex_;
  std::vector<std::string> lists_;
  std::unique_ptr<control::channel_member> member_;  // last: its reader stops first
};

TEST_F(actor_protocol, coordinator_switches_fusion_at_a_list_boundary_and_reports_its_sample) {
  inbox rank0, rank1;
  auto coord = coordinator({fake<member_actor>(rank0), fake<member_actor>(rank1)}, {{}, 0, 4, {}});
  // List 1: "a" alone; no fusion configured.
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({request(0, "a")}));
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({request(1, "a")}));
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 1u);
  EXPECT_FALSE(parsed(rank0.responses[0]).has_tuning());
  // While list 1 runs, b and c become ready and rank 1 asks for fusion.
  v1::Tuning fuse;
  fuse.set_fusion_threshold(1 << 20);
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u,
                 request_list({request(0, "b"), request(0, "c")}));
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u,
                 request_list({request(1, "b"), request(1, "c")}, fuse));
  sched_.run();
  EXPECT_EQ(rank0.responses.size(), 1u);  // nothing new before list 1 has run here
  caf::anon_send(coord, executed_atom::value, list_stats{1, 1000, 0.5});
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 2u);
  ASSERT_EQ(rank1.responses, rank0.responses);  // every member gets the same list
  auto list2 = parsed(rank0.responses[1]);
  ASSERT_TRUE(list2.tuning().has_fusion_threshold());
  EXPECT_EQ(list2.tuning().fusion_threshold(), 1 << 20);
  ASSERT_EQ(list2.responses_size(), 1);  // b and c fused under the new threshold
  EXPECT_EQ(list2.responses(0).tensor_names_size(), 2);
  // The sample restarts at the change: only list 2's numbers count.
  caf::anon_send(coord, executed_atom::value, list_stats{1, 64, 0.25});
  list_stats sample;
  auto probe = sys_.spawn([&](caf::event_based_actor* self) {
    self->request(coord, caf::infinite, stats_atom::value).then([&](const list_stats& s) {
      sample = s;
    });
  });
  sched_.run();
  EXPECT_EQ(sample.lists, 1u);
  EXPECT_EQ(sample.bytes, 64u);
  EXPECT_DOUBLE_EQ(sample.seconds, 0.25);
  caf::anon_send_exit(probe, caf::exit_reason::user_shutdown);
}

// HOROVOD_DISABLE_GROUP_FUSION: a grouped call's tensors fuse among
// themselves, plain calls with nothing.
TEST_F(actor_protocol, coordinator_without_group_fusion_fuses_within_groups_only) {
  inbox rank0, rank1;
  coordinator::coordinator_options options{{}, 1 << 20, 8, {}};
  options.disable_group_fusion = true;
  auto coord = coordinator({fake<member_actor>(rank0), fake<member_actor>(rank1)}, options);
  const auto grouped = [](int rank, const std::string& name) {
    auto r = request(rank, name);
    r.set_group_name("g");
    r.set_group_size(2);
    return r;
  };
  for (int r = 0; r < 2; ++r)
    caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({request(r, "a")}));
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 1u);
  // Ready while list 1 runs: two plain calls and a group of two.
  for (int r = 0; r < 2; ++r)
    caf::anon_send(coord, request_atom::value, int64_t{0}, 0u,
                   request_list({request(r, "p"), grouped(r, "x"), request(r, "q"),
                                 grouped(r, "y")}));
  sched_.run();
  caf::anon_send(coord, executed_atom::value, list_stats{1, 16, 0.001});
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 2u);
  const auto list = parsed(rank0.responses[1]);
  std::vector<std::vector<std::string>> works;
  for (const auto& resp : list.responses())
    works.emplace_back(resp.tensor_names().begin(), resp.tensor_names().end());
  // The group is released once whole, after q.
  EXPECT_EQ(works, (std::vector<std::vector<std::string>>{{"p"}, {"q"}, {"x", "y"}}));
}

// What a set's tuner sends: applied at the next list, which goes out at
// once (alone when nothing is pending) and tells every member.
TEST_F(actor_protocol, coordinator_applies_its_tuners_change_at_the_next_list) {
  inbox rank0, rank1;
  auto coord = coordinator({fake<member_actor>(rank0), fake<member_actor>(rank1)}, {{}, 0, 4, {}});
  caf::anon_send(coord, tune_atom::value, std::string("\xff not a Tuning"));
  sched_.run();
  EXPECT_TRUE(rank0.responses.empty());  // dropped, and nothing to send
  v1::Tuning t;
  t.set_fusion_threshold(4096);
  t.set_cycle_time_us(0);
  caf::anon_send(coord, tune_atom::value, t.SerializeAsString());
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 1u);
  EXPECT_EQ(rank1.responses, rank0.responses);
  const auto list = parsed(rank0.responses[0]);
  EXPECT_EQ(list.responses_size(), 0);
  EXPECT_EQ(list.tuning().fusion_threshold(), 4096);
  EXPECT_TRUE(list.tuning().has_cycle_time_us());
  EXPECT_FALSE(list.tuning().has_cache_capacity());
}

// A setting the application set (troupe::tune, in a member's request
// list) stays: a tuner's change that crossed it on its way changes only the
// settings the application left to the tuner.
TEST_F(actor_protocol, coordinator_keeps_the_applications_settings_over_its_tuners) {
  inbox rank0, rank1;
  auto coord = coordinator({fake<member_actor>(rank0), fake<member_actor>(rank1)}, {{}, 0, 4, {}});
  v1::Tuning application;
  application.set_fusion_threshold(1024);
  caf::anon_send(coord, request_atom::value, int64_t{0}, 1u, request_list({}, application));
  v1::Tuning crossed;
  crossed.set_fusion_threshold(65536);
  crossed.set_cycle_time_us(500);
  caf::anon_send(coord, tune_atom::value, crossed.SerializeAsString());
  sched_.run();
  caf::anon_send(coord, executed_atom::value, list_stats{1, 0, 0.0});
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 2u);
  v1::Tuning in_force;
  for (const auto& bytes : rank0.responses)
    in_force.MergeFrom(parsed(bytes).tuning());
  EXPECT_EQ(in_force.fusion_threshold(), 1024);
  EXPECT_EQ(in_force.cycle_time_us(), 500);
}

// Every member learns all the settings the application has set, whichever
// member set them, in the list that applies a change of them, and only
// there: a reset asks the next coordinator for them again.
TEST_F(actor_protocol, coordinator_names_the_applications_settings_where_they_change) {
  inbox rank0, rank1;
  auto coord = coordinator({fake<member_actor>(rank0), fake<member_actor>(rank1)}, {{}, 0, 4, {}});
  v1::Tuning first;
  first.set_fusion_threshold(1024);
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({}, first));
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 1u);
  EXPECT_EQ(rank1.responses, rank0.responses);
  EXPECT_EQ(parsed(rank0.responses[0]).application().SerializeAsString(),
            first.SerializeAsString());
  // A tuner's change is not the application's.
  v1::Tuning tuners;  // no cycle time: the lists below would wait for a timer
  tuners.set_fusion_chunk_bytes(4096);
  caf::anon_send(coord, tune_atom::value, tuners.SerializeAsString());
  caf::anon_send(coord, executed_atom::value, list_stats{1, 0, 0.0});
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 2u);
  EXPECT_TRUE(parsed(rank0.responses[1]).has_tuning());
  EXPECT_FALSE(parsed(rank0.responses[1]).has_application());
  // Another member's change: the list names both settings.
  v1::Tuning second;
  second.set_cache_capacity(8);
  request_after_executed(coord, request_list({request(1, "a")}, second));
  ASSERT_EQ(rank0.responses.size(), 3u);
  const auto application = parsed(rank0.responses[2]).application();
  EXPECT_EQ(application.fusion_threshold(), 1024);
  EXPECT_EQ(application.cache_capacity(), 8);
  EXPECT_FALSE(application.has_fusion_chunk_bytes());
  // Lists that change nothing of them do not name them.
  request_after_executed(coord, request_list({request(0, "a")}));
  ASSERT_EQ(rank0.responses.size(), 4u);
  EXPECT_FALSE(parsed(rank0.responses[3]).has_application());
}

// After a reset each survivor sends the previous epoch's application
// settings (RequestList.restored): each counts only where no change of this
// epoch set it, so a tune() made after the reset wins whichever comes first.
TEST_F(actor_protocol, coordinator_restores_only_what_no_change_of_its_epoch_set) {
  inbox rank0, rank1;
  auto coord = coordinator({fake<member_actor>(rank0), fake<member_actor>(rank1)}, {{}, 0, 4, {}});
  v1::Tuning now;
  now.set_fusion_chunk_bytes(8);
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({}, now));
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 1u);
  v1::RequestList restore;
  restore.mutable_restored()->set_fusion_chunk_bytes(4);
  restore.mutable_restored()->set_fusion_threshold(2048);
  request_after_executed(coord, restore.SerializeAsString());
  ASSERT_EQ(rank0.responses.size(), 2u);
  const auto second = parsed(rank0.responses[1]);
  EXPECT_EQ(second.tuning().fusion_threshold(), 2048);
  EXPECT_FALSE(second.tuning().has_fusion_chunk_bytes());
  EXPECT_EQ(second.application().fusion_chunk_bytes(), 8);
  EXPECT_EQ(second.application().fusion_threshold(), 2048);
  // Another survivor's restore of the same settings changes nothing.
  request_after_executed(coord, restore.SerializeAsString());
  EXPECT_EQ(rank0.responses.size(), 2u);
  // A change in the list of a restore came after it.
  v1::RequestList both;
  both.mutable_restored()->set_cache_capacity(4);
  both.mutable_tuning()->set_cache_capacity(16);
  request_after_executed(coord, both.SerializeAsString());
  ASSERT_EQ(rank0.responses.size(), 3u);
  EXPECT_EQ(parsed(rank0.responses[2]).application().cache_capacity(), 16);
  EXPECT_EQ(parsed(rank0.responses[2]).tuning().cache_capacity(), 16);
}

TEST_F(actor_protocol, coordinator_fails_a_missed_deadline_on_every_member) {
  inbox rank0, rank1;
  auto coord = coordinator({fake<member_actor>(rank0), fake<member_actor>(rank1)}, {{}, 0, 4, {}});
  auto late = request(0, "troupe.process_set.add.1");
  late.set_deadline_ms(20);
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({late}));
  sched_.run();
  EXPECT_TRUE(rank0.responses.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  sched_.trigger_timeouts();
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 1u);
  auto list = parsed(rank1.responses[0]);
  ASSERT_EQ(list.responses_size(), 1);
  EXPECT_EQ(list.responses(0).op(), v1::OP_TYPE_ERROR);
  EXPECT_EQ(list.responses(0).error().code(), v1::ERROR_CODE_TIMEOUT);
  EXPECT_NE(list.responses(0).error().message().find("rank(s) 1 "), std::string::npos);
}

TEST_F(actor_protocol, coordinator_answers_with_the_members_device_kind) {
  inbox rank0, rank1;
  auto coord = coordinator({fake<member_actor>(rank0), fake<member_actor>(rank1)}, {{}, 0, 4, {}});
  for (int r = 0; r < 2; ++r) {
    auto req = request(r, "g");
    req.set_device_kind(v1::DEVICE_KIND_CUDA);
    caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({req}));
  }
  sched_.run();
  ASSERT_EQ(rank1.responses.size(), 1u);
  auto list = parsed(rank1.responses[0]);
  ASSERT_EQ(list.responses_size(), 1);
  EXPECT_EQ(list.responses(0).op(), v1::OP_TYPE_ALLREDUCE);
  EXPECT_EQ(list.responses(0).device_kind(), v1::DEVICE_KIND_CUDA);
}

// A member on the coordinator's control channel gets the same lists as one
// over the network, also when each is longer than the channel's stream: the
// coordinator writes what fits and retries the rest from its timer.
TEST_F(actor_protocol, response_lists_longer_than_the_channel_reach_its_member_whole_and_in_order) {
  inbox rank0, rank1;
  coordinator::coordinator_options o{{}, 0, 4, {}};
  o.stall.enabled = false;
  o.control = std::make_shared<control::channel_host>(2, control::channel_sizes{256, 256});
  channel_listener member(o.control->name(), 1);
  ASSERT_TRUE(member.opened());
  auto coord = coordinator::spawn_coordinator(sys_, 0, 2, o, metrics_);
  spawned_.push_back(caf::actor_cast<caf::actor>(coord));
  caf::anon_send(coord, hello_atom::value, int32_t{0}, fake<member_actor>(rank0), false,
                 std::string("host"));
  caf::anon_send(coord, hello_atom::value, int32_t{1}, fake<member_actor>(rank1), true,
                 std::string("host"));
  constexpr size_t lists = 3;
  for (size_t l = 0; l < lists; ++l) {
    for (int r = 0; r < 2; ++r) {
      std::vector<v1::Request> requests;
      for (int t = 0; t < 20; ++t)
        requests.push_back(request(r, "list" + std::to_string(l) + ".a.rather.long.name." +
                                         std::to_string(t)));
      caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list(requests));
    }
    sched_.run();
    const auto received = member.await(l + 1, [&] {
      sched_.trigger_timeouts();
      sched_.run();
    });
    ASSERT_EQ(received.size(), l + 1) << "list " << l << " did not come through the channel";
    caf::anon_send(coord, executed_atom::value, list_stats{1, 0, 0.0});  // rank 0 ran it
    sched_.run();
  }
  ASSERT_EQ(rank0.responses.size(), lists);
  EXPECT_GT(rank0.responses[0].size(), 256u);  // longer than the stream
  EXPECT_TRUE(rank1.responses.empty());        // nothing over the network
  EXPECT_EQ(member.lists(), rank0.responses);
}

// The list that turns the fast lane on (here: once the tuner stopped, the
// application having set every setting it searched) drops from the cache
// what some member asked the coordinator for before it: the others would
// post it on the arrival board, each side waiting for the other (a step of
// tune_reset_check hung so for the stall check's 10 s).
TEST_F(actor_protocol, coordinator_uncaches_what_members_asked_for_when_the_lane_turns_on) {
  inbox rank0, rank1;
  coordinator::coordinator_options o{{}, 0, 4, {}};
  o.stall.enabled = false;
  o.control = std::make_shared<control::channel_host>(2, control::channel_sizes{4096, 4096, 64});
  coordinator::tuner_options tuning;
  tuning.search.tune_cycle = false;
  tuning.search.tune_cache = false;  // a change of the capacity would empty the cache
  tuning.search.tune_chunk = false;
  tuning.metrics = rank_metrics_->for_autotune(0);
  o.autotune = tuning;
  channel_listener member(o.control->name(), 1);
  ASSERT_TRUE(member.opened());
  const auto await_lists = [&](size_t n) {
    std::vector<v1::ResponseList> lists;
    for (const auto& bytes : member.await(n))
      lists.push_back(parsed(bytes));
    return lists;
  };
  auto coord = coordinator::spawn_coordinator(sys_, 0, 2, o, metrics_);
  spawned_.push_back(caf::actor_cast<caf::actor>(coord));
  for (int32_t r = 0; r < 2; ++r)
    caf::anon_send(coord, hello_atom::value, r, fake<member_actor>(r == 0 ? rank0 : rank1), true,
                   std::string("host"));
  // List 1: "a", cached; the tuner runs, so the lane is off.
  for (int r = 0; r < 2; ++r)
    caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({request(r, "a")}));
  sched_.run();
  auto seen = await_lists(1);
  ASSERT_EQ(seen.size(), 1u);
  ASSERT_FALSE(seen[0].fast_lane().on());
  ASSERT_EQ(seen[0].responses_size(), 1);
  ASSERT_EQ(seen[0].responses(0).cache_ids_size(), 1);
  const auto id = seen[0].responses(0).cache_ids(0);
  caf::anon_send(coord, executed_atom::value, list_stats{1, 0, 0.0});
  // Rank 0 asks for "a" again, by its cache id: it waits for rank 1.
  v1::RequestList hit;
  hit.set_process_set_id(0);
  hit.set_lists_applied(1);
  hit.set_sender_rank(0);
  hit.set_ranks_end(1);
  auto* req = hit.add_requests();
  req->set_cache_id(id);
  req->set_cache_list(1);
  req->set_request_rank(0);
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, hit.SerializeAsString());
  // Rank 1 sets the one setting the tuner searches: the tuner stops (on its
  // own thread; the coordinator learns it from its exit).
  const auto running = sys_.registry().running();
  v1::Tuning every;
  every.set_fusion_threshold(0);
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({}, every));
  sched_.run();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (sys_.registry().running() >= running && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_LT(sys_.registry().running(), running) << "the tuner did not stop";
  sched_.run();
  // "b" from both: the next list turns the lane on, and names "a" uncached,
  // so that rank 1 asks the coordinator for it instead of posting it.
  const auto before = await_lists(2).size();
  caf::anon_send(coord, executed_atom::value, list_stats{1, 0, 0.0});
  for (int r = 0; r < 2; ++r)
    caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({request(r, "b")}));
  sched_.run();
  seen = await_lists(before + 1);
  ASSERT_EQ(seen.size(), before + 1);
  const auto& turned_on = seen.back();
  ASSERT_TRUE(turned_on.fast_lane().on());
  EXPECT_EQ(std::vector<std::string>(turned_on.uncached_names().begin(),
                                     turned_on.uncached_names().end()),
            std::vector<std::string>{"a"});
  // Rank 1's full request for "a" then completes it.
  caf::anon_send(coord, executed_atom::value, list_stats{1, 0, 0.0});
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({request(1, "a")}));
  sched_.run();
  seen = await_lists(before + 2);
  ASSERT_EQ(seen.size(), before + 2);
  ASSERT_EQ(seen.back().responses_size(), 1);
  EXPECT_EQ(seen.back().responses(0).tensor_names(0), "a");
}

TEST_F(actor_protocol, coordinator_answers_once_every_member_introduced_itself) {
  inbox rank0, rank1;
  coordinator::coordinator_options o{{}, 0, 4, {}};
  o.stall.enabled = false;
  auto coord = coordinator::spawn_coordinator(sys_, 0, 2, o, metrics_);
  spawned_.push_back(caf::actor_cast<caf::actor>(coord));
  caf::anon_send(coord, hello_atom::value, int32_t{0}, fake<member_actor>(rank0), false,
                 std::string("host"));
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({request(0, "a")}));
  caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, request_list({request(1, "a")}));
  sched_.run();
  EXPECT_TRUE(rank0.responses.empty());  // rank 1 would miss the list
  caf::anon_send(coord, hello_atom::value, int32_t{1}, fake<member_actor>(rank1), false,
                 std::string("host"));
  sched_.run();
  ASSERT_EQ(rank0.responses.size(), 1u);
  EXPECT_EQ(rank1.responses, rank0.responses);
}

} // namespace
} // namespace troupe::actors
