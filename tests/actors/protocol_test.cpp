// Negotiator and coordinator driven message by message with CAF's
// deterministic test scheduler: what each sends, and when.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <mutex>
#include <thread>

#include "actors/negotiator.hpp"
#include "control/shm_channel.hpp"
#include "coordinator/coordinator_actor.hpp"
#include "metrics/rank_metrics.hpp"

namespace troupe::actors {
namespace {

using caf::scheduler::test_coordinator;

caf::actor_system_config& testing_config(caf::actor_system_config& cfg) {
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  return cfg;
}

using executed_promise = caf::typed_response_promise<executed_atom, uint64_t, status, list_stats>;

// What a fake peer received: control-plane bytes, introductions,
// completions, works.
struct inbox {
  std::vector<std::string> requests;   // RequestList bytes
  std::vector<std::string> responses;  // ResponseList bytes
  std::vector<std::pair<int32_t, member_actor>> hellos;
  std::vector<std::string> order;  // "hello" and "request", as received
  std::vector<list_stats> executed;
  std::vector<collective_work_ptr> works;
  std::vector<executed_promise> running;  // works a fake backend holds
  int aborts = 0;
  int interrupts = 0;  // of a fake backend, from outside its mailbox
};

// Stands in for a coordinator or a member's negotiator: records what the
// actor under test sends it.
caf::behavior recorder(caf::event_based_actor*, inbox* box) {
  return {
    [=](hello_atom, int32_t set_rank, const member_actor& member, bool, const std::string&) {
      box->hellos.emplace_back(set_rank, member);
      box->order.emplace_back("hello");
    },
    [=](request_atom, int64_t, uint32_t, const std::string& bytes) {
      box->requests.push_back(bytes);
      box->order.emplace_back("request");
    },
    [=](response_atom, int64_t, uint32_t, const std::string& bytes) {
      box->responses.push_back(bytes);
    },
    [=](executed_atom, const list_stats& s) { box->executed.push_back(s); },
  };
}

// A backend that answers each work with `moved` bytes, or holds it with
// `answer` false (a work still running).
backend_actor::behavior_type fake_backend(backend_actor::pointer self, inbox* box,
                                          uint64_t moved, bool answer) {
  return {
    [=](connect_atom) { return status{}; },
    [=](abort_atom, const status&) { ++box->aborts; },
    [=](poll_atom) {},
    [=](execute_atom,
        const collective_work_ptr& w) -> caf::result<executed_atom, uint64_t, status, list_stats> {
      box->works.push_back(w);
      if (answer)
        return {executed_atom::value, w->id, status{}, list_stats{0, moved, 0.25}};
      box->running.push_back(
        self->make_response_promise<executed_atom, uint64_t, status, list_stats>());
      return box->running.back();
    },
  };
}

class actor_protocol : public ::testing::Test {
protected:
  actor_protocol()
    : sys_(testing_config(cfg_)),
      sched_(dynamic_cast<test_coordinator&>(sys_.scheduler())),
      rank_metrics_(std::make_shared<metrics::rank_metrics>(metrics::rank_position{0, 2, 0},
                                                            "gloo")),
      metrics_(rank_metrics_->for_set(0, 2, "gloo")) {
  }

  ~actor_protocol() override {
    for (auto& a : spawned_)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched_.run();
  }

  // A recorder standing in for an actor of interface Handle.
  template <class Handle>
  Handle fake(inbox& box) {
    spawned_.push_back(sys_.spawn(recorder, &box));
    return caf::actor_cast<Handle>(spawned_.back());
  }

  backend_ref backend(inbox& box, uint64_t moved = 0, bool answer = true) {
    auto b = sys_.spawn(fake_backend, &box, moved, answer);
    spawned_.push_back(caf::actor_cast<caf::actor>(b));
    return {b, [&box] { ++box.interrupts; }};
  }

  // A coordinator whose members have introduced themselves.
  coordinator_actor coordinator(std::vector<member_actor> members,
                                coordinator::coordinator_options o) {
    o.stall.enabled = false;
    auto c = coordinator::spawn_coordinator(sys_, 0, static_cast<int32_t>(members.size()), o,
                                            metrics_);
    spawned_.push_back(caf::actor_cast<caf::actor>(c));
    for (size_t r = 0; r < members.size(); ++r)
      caf::anon_send(c, hello_atom::value, static_cast<int32_t>(r), members[r], false,
                     std::string("host"));
    return c;
  }

  // Set 0, set rank 0, this fixture's metrics, in membership epoch `epoch`.
  negotiator_args args(int64_t epoch = 0) const {
    negotiator_args a;
    a.metrics = metrics_;
    a.epoch = epoch;
    return a;
  }

  // A negotiator that has not been told its coordinator yet.
  negotiator_actor negotiator(const coordinator_actor& local_coordinator,
                              const backend_actors& backends) {
    auto n = spawn_negotiator(sys_, args(), local_coordinator, backends, caf::actor{});
    spawned_.push_back(caf::actor_cast<caf::actor>(n));
    return n;
  }

  // A negotiator told `coordinator`, as its supervisor would.
  negotiator_actor negotiator(const coordinator_actor& coordinator,
                              const coordinator_actor& local_coordinator,
                              const backend_ref& cpu_backend) {
    auto n = negotiator(local_coordinator, {{device_kind::cpu, cpu_backend}});
    caf::anon_send(n, coordinator_atom::value, coordinator, std::string());
    return n;
  }

  // A negotiator with an inbox, the API's way in, told `coordinator`.
  set_entrance entrance_told(const coordinator_actor& coordinator,
                             const backend_ref& cpu_backend) {
    auto a = args();
    a.inbox = std::make_shared<submission_inbox>();
    auto n = spawn_negotiator(sys_, a, {}, {{device_kind::cpu, cpu_backend}}, caf::actor{});
    spawned_.push_back(caf::actor_cast<caf::actor>(n));
    caf::anon_send(n, coordinator_atom::value, coordinator, std::string());
    sched_.run();
    return {n, a.inbox};
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  test_coordinator& sched_;
  std::shared_ptr<metrics::rank_metrics> rank_metrics_;
  std::shared_ptr<metrics::set_metrics> metrics_;
  std::vector<caf::actor> spawned_;
};

v1::Request request(int rank, const std::string& name, int64_t length = 4) {
  v1::Request r;
  r.set_request_rank(rank);
  r.set_tensor_name(name);
  r.set_op(v1::OP_TYPE_ALLREDUCE);
  r.set_dtype(v1::DATA_TYPE_FLOAT32);
  r.set_reduce_op(v1::REDUCE_OP_SUM);
  r.set_prescale_factor(1);
  r.set_postscale_factor(1);
  r.add_shape(length);
  return r;
}

// A float32 allreduce of `x` (caller-owned) from set rank 0.
tensor_entry_ptr entry(const std::string& name, std::vector<float>& x) {
  auto e = std::make_shared<tensor_entry>();
  e->request = request(0, name, static_cast<int64_t>(x.size()));
  e->input = e->output = tensor{x.data(), data_type::float32, {static_cast<int64_t>(x.size())}};
  return e;
}

// The same collective submitted again, with a handle of its own.
tensor_entry_ptr again_of(const tensor_entry& e) {
  auto copy = std::make_shared<tensor_entry>(e);
  copy->handle = &copy->state;
  return copy;
}

std::string request_list(std::vector<v1::Request> requests,
                         std::optional<v1::Tuning> tuning = std::nullopt) {
  v1::RequestList list;
  for (auto& r : requests)
    *list.add_requests() = std::move(r);
  if (tuning)
    *list.mutable_tuning() = *tuning;
  return list.SerializeAsString();
}

v1::ResponseList parsed(const std::string& bytes) {
  v1::ResponseList list;
  EXPECT_TRUE(list.ParseFromString(bytes));
  return list;
}

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

TEST_F(actor_protocol, negotiator_reports_what_a_list_moved_and_forwards_tuning) {
  inbox endpoint, local, backend_box;
  auto neg = negotiator(fake<coordinator_actor>(endpoint), fake<coordinator_actor>(local),
                        backend(backend_box, 16));
  std::vector<float> x(4, 1.0f);
  auto e = entry("x", x);
  submit_batch(neg, entry_batch{e});
  sched_.run();
  ASSERT_EQ(endpoint.requests.size(), 1u);
  v1::RequestList sent;
  ASSERT_TRUE(sent.ParseFromString(endpoint.requests[0]));
  ASSERT_EQ(sent.requests_size(), 1);
  EXPECT_EQ(sent.requests(0).tensor_name(), "x");
  // A settings change travels alone when nothing else is pending.
  v1::Tuning t;
  t.set_cycle_time_us(500);
  caf::anon_send(neg, tune_atom::value, t.SerializeAsString());
  sched_.run();
  ASSERT_EQ(endpoint.requests.size(), 2u);
  ASSERT_TRUE(sent.ParseFromString(endpoint.requests[1]));
  EXPECT_EQ(sent.requests_size(), 0);
  EXPECT_EQ(sent.tuning().cycle_time_us(), 500);
  // The coordinator's answer runs on the backend; the handle completes and
  // the co-located coordinator learns what the list moved.
  v1::ResponseList list;
  auto* resp = list.add_responses();
  resp->set_op(v1::OP_TYPE_ALLREDUCE);
  resp->add_tensor_names("x");
  resp->add_tensor_sizes(1);
  resp->add_cache_ids(3);
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, list.SerializeAsString());
  sched_.run();
  ASSERT_EQ(backend_box.works.size(), 1u);
  EXPECT_TRUE(e->handle->done());
  EXPECT_TRUE(e->handle->result().ok());
  ASSERT_EQ(local.executed.size(), 1u);
  EXPECT_EQ(local.executed[0].lists, 1u);
  EXPECT_EQ(local.executed[0].bytes, 16u);
  // Cached now: the same request goes as its id ...
  auto again = [&] {
    auto e2 = again_of(*e);
    submit_batch(neg, entry_batch{e2});
    sched_.run();
    v1::RequestList l;
    EXPECT_TRUE(l.ParseFromString(endpoint.requests.back()));
    return l.requests(0).cache_id();
  };
  EXPECT_EQ(again(), 3u);
  // ... until a list announces a new cache capacity: then in full.
  v1::ResponseList resize;
  resize.mutable_tuning()->set_cache_capacity(8);
  auto* done = resize.add_responses();
  *done = *resp;
  done->clear_cache_ids();
  done->add_cache_ids(0);
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, resize.SerializeAsString());
  sched_.run();
  EXPECT_EQ(again(), 0u);
}

TEST_F(actor_protocol, negotiator_abort_fails_pending_handles) {
  inbox endpoint, backend_box;
  auto neg = negotiator(fake<coordinator_actor>(endpoint), {}, backend(backend_box));
  std::vector<float> x(1);
  auto e = entry("y", x);
  submit_batch(neg, entry_batch{e});
  caf::anon_send(neg, abort_atom::value, status{status_code::peer_lost, "rank 1 was lost"});
  sched_.run();
  ASSERT_TRUE(e->handle->done());
  EXPECT_EQ(e->handle->result().code(), status_code::peer_lost);
}

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

TEST_F(actor_protocol, a_running_work_completes_before_the_negotiator_stops) {
  inbox endpoint, backend_box;
  auto neg = negotiator(fake<coordinator_actor>(endpoint), {}, backend(backend_box, 0, false));
  std::vector<float> x(2);
  auto e = entry("z", x);
  submit_batch(neg, entry_batch{e});
  v1::ResponseList list;
  list.add_responses()->set_op(v1::OP_TYPE_ALLREDUCE);
  list.mutable_responses(0)->add_tensor_names("z");
  list.mutable_responses(0)->add_tensor_sizes(2);
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, list.SerializeAsString());
  sched_.run();
  ASSERT_EQ(backend_box.works.size(), 1u);
  // A reset: the set stops while the backend still holds the buffer.
  caf::anon_send(neg, abort_atom::value, status{status_code::reset, "resetting"});
  caf::anon_send(neg, shutdown_atom::value);
  sched_.run();
  EXPECT_FALSE(e->handle->done());  // the caller may not free x yet
  caf::anon_send(neg, executed_atom::value, backend_box.works[0]->id,
                 status{status_code::backend, "connection closed"}, list_stats{});
  sched_.run();
  ASSERT_TRUE(e->handle->done());
  EXPECT_EQ(e->handle->result().code(), status_code::reset);
  // The negotiator has stopped: a submission now fails instead of hanging.
  auto late = again_of(*e);
  submit_batch(neg, entry_batch{late});
  sched_.run();
  ASSERT_TRUE(late->handle->done());
  EXPECT_EQ(late->handle->result().code(), status_code::shut_down);
}

tensor_entry_ptr entry_on(const std::string& name, std::vector<float>& x, v1::DeviceKind kind) {
  auto e = entry(name, x);
  e->request.set_device_kind(kind);
  e->request.set_device_ordinal(kind == v1::DEVICE_KIND_CUDA ? 1 : 0);
  return e;
}

std::string response_on(const std::string& name, v1::DeviceKind kind) {
  v1::ResponseList list;
  auto* resp = list.add_responses();
  resp->set_op(v1::OP_TYPE_ALLREDUCE);
  resp->set_device_kind(kind);
  resp->add_tensor_names(name);
  resp->add_tensor_sizes(2);
  return list.SerializeAsString();
}

// What the backends would index by is checked first; an error for another
// rank's late request leaves this rank's newer round alone.
TEST_F(actor_protocol, a_malformed_response_or_another_ranks_late_error_runs_nothing_here) {
  inbox endpoint, cpu;
  auto neg = negotiator(fake<coordinator_actor>(endpoint), {}, backend(cpu));
  std::vector<float> x(2), y(2), z(2);
  auto a = entry("a", x);
  auto b = entry("b", y);
  auto c = entry("c", z);
  submit_batch(neg, entry_batch{a, b, c});
  v1::ResponseList list;
  auto* fused = list.add_responses();  // sizes for one of its two tensors
  fused->set_op(v1::OP_TYPE_ALLREDUCE);
  fused->add_tensor_names("a");
  fused->add_tensor_names("b");
  fused->add_tensor_sizes(2);
  auto* late = list.add_responses();
  late->set_op(v1::OP_TYPE_ERROR);
  late->add_tensor_names("c");
  late->mutable_error()->set_code(v1::ERROR_CODE_TIMEOUT);
  late->mutable_error()->set_message("rank 1 was late");
  late->set_only_rank(1);
  auto* unknown = list.add_responses();  // "c" and a tensor this rank never submitted
  unknown->set_op(v1::OP_TYPE_ALLREDUCE);
  unknown->add_tensor_names("c");
  unknown->add_tensor_names("d");
  unknown->add_tensor_sizes(2);
  unknown->add_tensor_sizes(2);
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, list.SerializeAsString());
  sched_.run();
  EXPECT_TRUE(cpu.works.empty());
  for (const auto& e : {a, b}) {
    ASSERT_TRUE(e->handle->done());
    EXPECT_EQ(e->handle->result().code(), status_code::internal);
    EXPECT_EQ(e->handle->result().message(),
              "process set 0: the coordinator's ALLREDUCE response for 'a' and others has 1 "
              "tensor_sizes for 2 tensor(s), not 2");
  }
  ASSERT_TRUE(c->handle->done());  // not by the late error: by the unknown tensor
  EXPECT_EQ(c->handle->result().message(),
            "process set 0: the coordinator's ALLREDUCE response names tensor 'd', which set "
            "rank 0 has not submitted");
}

TEST_F(actor_protocol, device_kind_travels_to_the_coordinator_and_picks_the_backend) {
  inbox endpoint, cpu, cuda;
  auto neg =
    negotiator({}, {{device_kind::cpu, backend(cpu)}, {device_kind::cuda, backend(cuda)}});
  caf::anon_send(neg, coordinator_atom::value, fake<coordinator_actor>(endpoint), std::string());
  std::vector<float> x(2), y(2);
  auto on_gpu = entry_on("g", x, v1::DEVICE_KIND_CUDA);
  auto on_cpu = entry_on("c", y, v1::DEVICE_KIND_CPU);
  submit_batch(neg, entry_batch{on_gpu});
  submit_batch(neg, entry_batch{on_cpu});
  sched_.run();
  std::vector<v1::Request> sent;
  for (const auto& bytes : endpoint.requests) {
    v1::RequestList l;
    ASSERT_TRUE(l.ParseFromString(bytes));
    sent.insert(sent.end(), l.requests().begin(), l.requests().end());
  }
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].device_kind(), v1::DEVICE_KIND_CUDA);
  EXPECT_EQ(sent[0].device_ordinal(), 1);
  EXPECT_EQ(sent[1].device_kind(), v1::DEVICE_KIND_CPU);
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, response_on("g", v1::DEVICE_KIND_CUDA));
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, response_on("c", v1::DEVICE_KIND_CPU));
  sched_.run();
  ASSERT_EQ(cuda.works.size(), 1u);
  EXPECT_EQ(cuda.works[0]->entries.front(), on_gpu);
  ASSERT_EQ(cpu.works.size(), 1u);
  EXPECT_EQ(cpu.works[0]->entries.front(), on_cpu);
  EXPECT_TRUE(on_gpu->handle->result().ok() && on_cpu->handle->result().ok());
  // An abort reaches every backend of the set as a message, for the works
  // queued; a reset leaves the running one to complete.
  caf::anon_send(neg, abort_atom::value, status{status_code::reset, "resetting"});
  sched_.run();
  EXPECT_EQ(cpu.aborts, 1);
  EXPECT_EQ(cuda.aborts, 1);
  EXPECT_EQ(cpu.interrupts + cuda.interrupts, 0);
  // A lost peer may hold it in the library until its timeout: interrupted.
  caf::anon_send(neg, abort_atom::value, status{status_code::peer_lost, "rank 1 was lost"});
  sched_.run();
  EXPECT_EQ(cpu.aborts, 2);
  EXPECT_EQ(cuda.aborts, 2);
  EXPECT_EQ(cpu.interrupts, 1);
  EXPECT_EQ(cuda.interrupts, 1);
}

TEST_F(actor_protocol, a_work_for_a_device_without_backend_fails) {
  inbox endpoint, cpu;
  auto neg = negotiator(fake<coordinator_actor>(endpoint), {}, backend(cpu));
  std::vector<float> x(2);
  auto e = entry_on("g", x, v1::DEVICE_KIND_CUDA);
  submit_batch(neg, entry_batch{e});
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, response_on("g", v1::DEVICE_KIND_CUDA));
  sched_.run();
  EXPECT_TRUE(cpu.works.empty());
  ASSERT_TRUE(e->handle->done());
  EXPECT_EQ(e->handle->result().code(), status_code::invalid_argument);
  EXPECT_EQ(e->handle->result().message(),
            "process set 0 has no backend for CUDA tensors on rank 0 of the set");
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

TEST_F(actor_protocol, negotiator_holds_requests_until_told_its_coordinator_then_introduces_itself) {
  inbox coord, cpu;
  auto neg = negotiator({}, {{device_kind::cpu, backend(cpu)}});
  std::vector<float> x(2);
  auto e = entry("early", x);
  submit_batch(neg, entry_batch{e});
  sched_.run();
  EXPECT_TRUE(coord.order.empty());
  EXPECT_FALSE(e->handle->done());  // held, not failed
  caf::anon_send(neg, coordinator_atom::value, fake<coordinator_actor>(coord), std::string());
  sched_.run();
  // Directly to the coordinator: first who it is, then what it held back.
  ASSERT_EQ(coord.order, (std::vector<std::string>{"hello", "request"}));
  ASSERT_EQ(coord.hellos.size(), 1u);
  EXPECT_EQ(coord.hellos[0].first, 0);
  EXPECT_EQ(coord.hellos[0].second.address(), neg.address());
  v1::RequestList sent;
  ASSERT_TRUE(sent.ParseFromString(coord.requests[0]));
  ASSERT_EQ(sent.requests_size(), 1);
  EXPECT_EQ(sent.requests(0).tensor_name(), "early");
  // Told again (a repeated announcement): no second introduction.
  caf::anon_send(neg, coordinator_atom::value, fake<coordinator_actor>(coord), std::string());
  sched_.run();
  EXPECT_EQ(coord.hellos.size(), 1u);
}

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

// A member on the coordinator's control channel gets the same lists as one
// over the network, also when each is longer than the channel's stream: the
// coordinator writes what fits and retries the rest from its timer.
TEST_F(actor_protocol, response_lists_longer_than_the_channel_reach_its_member_whole_and_in_order) {
  inbox rank0, rank1;
  coordinator::coordinator_options o{{}, 0, 4, {}};
  o.stall.enabled = false;
  o.control = std::make_shared<control::channel_host>(2, control::channel_sizes{256, 256});
  auto member = control::channel_member::open(o.control->name(), 1);
  ASSERT_NE(member, nullptr);
  std::mutex mutex;
  std::vector<std::string> on_channel;
  member->start([&](std::string list) {
    std::lock_guard<std::mutex> lock(mutex);
    on_channel.push_back(std::move(list));
  });
  auto coord = coordinator::spawn_coordinator(sys_, 0, 2, o, metrics_);
  spawned_.push_back(caf::actor_cast<caf::actor>(coord));
  caf::anon_send(coord, hello_atom::value, int32_t{0}, fake<member_actor>(rank0), false,
                 std::string("host"));
  caf::anon_send(coord, hello_atom::value, int32_t{1}, fake<member_actor>(rank1), true,
                 std::string("host"));
  const auto received = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return on_channel.size();
  };
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
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (received() < l + 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      sched_.trigger_timeouts();
      sched_.run();
    }
    ASSERT_EQ(received(), l + 1) << "list " << l << " did not come through the channel";
    caf::anon_send(coord, executed_atom::value, list_stats{1, 0, 0.0});  // rank 0 ran it
    sched_.run();
  }
  ASSERT_EQ(rank0.responses.size(), lists);
  EXPECT_GT(rank0.responses[0].size(), 256u);  // longer than the stream
  EXPECT_TRUE(rank1.responses.empty());        // nothing over the network
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(on_channel, rank0.responses);
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
