// A negotiator driven message by message with CAF's deterministic test
// scheduler, against a fake coordinator and fake backends: what it sends,
// runs and fails, and when.
#include <gtest/gtest.h>

#include "protocol_harness.hpp"

namespace troupe::actors {
namespace {

using namespace protocol_test;

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
  // A settings change travels alone when nothing else is pending, and so
  // does a reset's restore of the previous epoch's settings, apart from a
  // change (RequestList.restored): the coordinator weighs them apart.
  const auto sent_alone = [&](auto atom, const v1::Tuning& t, size_t lists) {
    caf::anon_send(neg, atom, t.SerializeAsString());
    sched_.run();
    v1::RequestList list;
    if (endpoint.requests.size() != lists) {
      ADD_FAILURE() << endpoint.requests.size() << " request lists, want " << lists;
      return list;
    }
    EXPECT_TRUE(list.ParseFromString(endpoint.requests.back()));
    EXPECT_EQ(list.requests_size(), 0);
    return list;
  };
  v1::Tuning t;
  t.set_cycle_time_us(500);
  sent = sent_alone(tune_atom::value, t, 2);
  EXPECT_EQ(sent.tuning().cycle_time_us(), 500);
  EXPECT_FALSE(sent.has_restored());
  v1::Tuning before;
  before.set_fusion_threshold(2048);
  sent = sent_alone(restore_atom::value, before, 3);
  EXPECT_FALSE(sent.has_tuning());
  EXPECT_EQ(sent.restored().fusion_threshold(), 2048);
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

// The global set's negotiator records the application's settings each list
// names, where its rank reads them after a reset; lists that name none
// leave them.
TEST_F(actor_protocol, negotiator_records_the_applications_settings_the_lists_name) {
  inbox endpoint, backend_box;
  auto a = args();
  a.application = std::make_shared<application_tuning>();
  auto neg = spawn_negotiator(sys_, a, {}, {{device_kind::cpu, backend(backend_box, 16)}},
                              caf::actor{});
  spawned_.push_back(caf::actor_cast<caf::actor>(neg));
  caf::anon_send(neg, coordinator_atom::value, fake<coordinator_actor>(endpoint), std::string());
  v1::ResponseList list;
  list.mutable_tuning()->set_cycle_time_us(500);
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, list.SerializeAsString());
  sched_.run();
  EXPECT_TRUE(a.application->recorded().empty());  // the tuner's change
  list.mutable_application()->set_cache_capacity(8);
  list.mutable_application()->set_fusion_chunk_bytes(4);
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, list.SerializeAsString());
  list.clear_application();
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, list.SerializeAsString());
  sched_.run();
  v1::Tuning recorded;
  ASSERT_TRUE(recorded.ParseFromString(a.application->recorded()));
  EXPECT_EQ(recorded.cache_capacity(), 8);
  EXPECT_EQ(recorded.fusion_chunk_bytes(), 4);
  EXPECT_FALSE(recorded.has_cycle_time_us());
}

// The global set's negotiator runs a small work itself while its backends
// run nothing (backend_ref::run_here), in the list's order: the next work
// of the list goes to the backend actor, since the one before it is still
// out when it launches. A work run here completes its handles and counts
// toward its list as the actor's answer would; one the backend may not run
// here (run_here gives nothing) goes to the actor.
TEST_F(actor_protocol, a_small_work_runs_on_the_negotiators_thread_while_the_backend_is_idle) {
  inbox endpoint, local, backend_box;
  auto cpu = backend(backend_box, 0, false);  // holds what reaches it
  std::vector<std::string> ran;
  bool refuse = false;
  cpu.run_here = [&](collective_work& w) -> std::optional<ran_here> {
    if (refuse)
      return std::nullopt;
    ran.push_back(w.response.tensor_names(0));
    return ran_here{status{}, list_stats{0, 8, 0.0, -1}};
  };
  auto a = args();
  a.runs_small_works = true;
  auto neg = spawn_negotiator(sys_, a, fake<coordinator_actor>(local),
                              {{device_kind::cpu, cpu}}, caf::actor{});
  spawned_.push_back(caf::actor_cast<caf::actor>(neg));
  caf::anon_send(neg, coordinator_atom::value, fake<coordinator_actor>(endpoint), std::string());
  std::vector<float> x(2), y(2), z(2), w(2);
  auto ex = entry("x", x), ey = entry("y", y), ez = entry("z", z), ew = entry("w", w);
  submit_batch(neg, entry_batch{ex, ey});
  const auto answer = [&](std::vector<std::string> names) {
    v1::ResponseList list;
    for (const auto& name : names) {
      auto* resp = list.add_responses();
      resp->set_op(v1::OP_TYPE_ALLREDUCE);
      resp->add_tensor_names(name);
      resp->add_tensor_sizes(2);
    }
    caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, list.SerializeAsString());
    sched_.run();
  };
  answer({"x", "y"});
  EXPECT_EQ(ran, std::vector<std::string>{"x"});
  ASSERT_EQ(backend_box.works.size(), 1u);
  EXPECT_EQ(backend_box.works[0]->response.tensor_names(0), "y");
  ASSERT_TRUE(ex->handle->done());
  EXPECT_TRUE(ex->handle->result().ok());
  EXPECT_FALSE(ey->handle->done());
  EXPECT_TRUE(local.executed.empty());  // the list is not over: y runs
  caf::anon_send(neg, executed_atom::value, backend_box.works[0]->id, status{},
                 list_stats{0, 8, 0.0, -1});
  sched_.run();
  EXPECT_TRUE(ey->handle->done());
  ASSERT_EQ(local.executed.size(), 1u);
  EXPECT_EQ(local.executed[0].lists, 1u);
  EXPECT_EQ(local.executed[0].bytes, 16u);  // x here and y on the actor
  // Nothing out: the next runs here again; one refused goes to the actor.
  submit_batch(neg, entry_batch{ez});
  answer({"z"});
  EXPECT_EQ(ran, (std::vector<std::string>{"x", "z"}));
  EXPECT_TRUE(ez->handle->done());
  refuse = true;
  submit_batch(neg, entry_batch{ew});
  answer({"w"});
  EXPECT_EQ(ran.size(), 2u);
  ASSERT_EQ(backend_box.works.size(), 2u);
  EXPECT_EQ(backend_box.works[1]->response.tensor_names(0), "w");
  EXPECT_FALSE(ew->handle->done());
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

// A name submitted again once the backend completed its work (the backend
// completes a success's handles itself), and running again before that
// work's (executed) came back: an abort fails neither running entry, as the
// backend may still write into their callers' memory.
TEST_F(actor_protocol, an_abort_fails_no_running_work_of_a_name_submitted_again) {
  inbox endpoint, backend_box;
  auto neg = negotiator(fake<coordinator_actor>(endpoint), {}, backend(backend_box, 0, false));
  std::vector<float> x(2);
  v1::ResponseList list;
  list.add_responses()->set_op(v1::OP_TYPE_ALLREDUCE);
  list.mutable_responses(0)->add_tensor_names("n");
  list.mutable_responses(0)->add_tensor_sizes(2);
  auto first = entry("n", x);
  submit_batch(neg, entry_batch{first});
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, list.SerializeAsString());
  sched_.run();
  ASSERT_EQ(backend_box.works.size(), 1u);
  first->handle->complete({});  // as the backend does, before (executed) reaches the negotiator
  auto second = again_of(*first);
  submit_batch(neg, entry_batch{second});
  caf::anon_send(neg, response_atom::value, int64_t{0}, 1u, list.SerializeAsString());
  sched_.run();
  ASSERT_EQ(backend_box.works.size(), 2u);
  caf::anon_send(neg, abort_atom::value, status{status_code::peer_lost, "rank 1 was lost"});
  sched_.run();
  EXPECT_FALSE(second->handle->done()) << "failed while the backend runs it";
  for (size_t i = 0; i < 2; ++i)
    caf::anon_send(neg, executed_atom::value, backend_box.works[i]->id,
                   status{status_code::backend, "connection closed"}, list_stats{});
  sched_.run();
  ASSERT_TRUE(second->handle->done());
  EXPECT_EQ(second->handle->result().code(), status_code::peer_lost);
  EXPECT_EQ(first->handle->result().code(), status_code::ok);
}

// A response that names a tensor already running here (a coordinator's
// fault): nothing runs a second time, and neither it nor a malformed
// response completes the running tensor before the backend's answer.
TEST_F(actor_protocol, a_response_naming_a_running_tensor_leaves_it_to_the_backend) {
  inbox endpoint, backend_box;
  auto neg = negotiator(fake<coordinator_actor>(endpoint), {}, backend(backend_box, 0, false));
  std::vector<float> x(2), y(2);
  auto a = entry("a", x);
  auto b = entry("b", y);
  submit_batch(neg, entry_batch{a, b});
  v1::ResponseList first;
  first.add_responses()->set_op(v1::OP_TYPE_ALLREDUCE);
  first.mutable_responses(0)->add_tensor_names("a");
  first.mutable_responses(0)->add_tensor_sizes(2);
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, first.SerializeAsString());
  sched_.run();
  ASSERT_EQ(backend_box.works.size(), 1u);
  v1::ResponseList again;
  auto* fused = again.add_responses();
  fused->set_op(v1::OP_TYPE_ALLREDUCE);
  fused->add_tensor_names("a");
  fused->add_tensor_names("b");
  fused->add_tensor_sizes(2);
  fused->add_tensor_sizes(2);
  auto* malformed = again.add_responses();  // no sizes
  malformed->set_op(v1::OP_TYPE_ALLREDUCE);
  malformed->add_tensor_names("a");
  caf::anon_send(neg, response_atom::value, int64_t{0}, 1u, again.SerializeAsString());
  sched_.run();
  EXPECT_EQ(backend_box.works.size(), 1u);
  EXPECT_FALSE(a->handle->done()) << "completed while the backend runs it";
  ASSERT_TRUE(b->handle->done());
  EXPECT_EQ(b->handle->result().message(),
            "process set 0: the coordinator's ALLREDUCE response names tensor 'a', which "
            "already runs on set rank 0");
  caf::anon_send(neg, executed_atom::value, backend_box.works[0]->id, status{}, list_stats{});
  sched_.run();
  ASSERT_TRUE(a->handle->done());
  EXPECT_TRUE(a->handle->result().ok());
}

// A malformed response for a tensor whose caller let go of its handle: the
// table held the entry's last reference, and the failure must not use the
// entry after taking it out of the table (AddressSanitizer builds report
// that use).
TEST_F(actor_protocol, a_malformed_response_fails_an_entry_only_the_table_holds) {
  inbox endpoint, cpu;
  auto neg = negotiator(fake<coordinator_actor>(endpoint), {}, backend(cpu));
  std::vector<float> x(2);
  auto a = entry("a", x);
  const std::weak_ptr<tensor_entry> watch = a;
  submit_batch(neg, entry_batch{std::move(a)});
  sched_.run();
  ASSERT_FALSE(watch.expired());
  v1::ResponseList list;
  auto* bad = list.add_responses();  // no tensor_sizes
  bad->set_op(v1::OP_TYPE_ALLREDUCE);
  bad->add_tensor_names("a");
  caf::anon_send(neg, response_atom::value, int64_t{0}, 0u, list.SerializeAsString());
  sched_.run();
  EXPECT_TRUE(cpu.works.empty());
  EXPECT_TRUE(watch.expired());
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

} // namespace
} // namespace troupe::actors
