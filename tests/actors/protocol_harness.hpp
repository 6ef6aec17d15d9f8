#pragma once

// Shared by the actor protocol tests (coordinator_protocol_test.cpp,
// negotiator_protocol_test.cpp, submission_inbox_protocol_test.cpp,
// negotiator_coordinator_test.cpp): the negotiator and coordinator driven
// message by message with CAF's deterministic test scheduler, fakes that
// record what each sends, and builders of requests, entries and lists.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <optional>
#include <string>
#include <vector>

#include "actors/negotiator.hpp"
#include "coordinator/coordinator_actor.hpp"
#include "metrics/rank_metrics.hpp"

namespace troupe::actors::protocol_test {

using caf::scheduler::test_coordinator;

caf::actor_system_config& testing_config(caf::actor_system_config& cfg);

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
caf::behavior recorder(caf::event_based_actor*, inbox* box);

// A backend that answers each work with `moved` bytes, or holds it with
// `answer` false (a work still running).
backend_actor::behavior_type fake_backend(backend_actor::pointer self, inbox* box,
                                          uint64_t moved, bool answer);

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
    return {b, [&box] { ++box.interrupts; }, nullptr};  // under the test scheduler: no run_here
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

  // Gives `coord` a request list (bytes) and tells it the list before was
  // executed, so that it may answer at once; then runs both.
  void request_after_executed(const coordinator_actor& coord, const std::string& list) {
    caf::anon_send(coord, request_atom::value, int64_t{0}, 0u, list);
    caf::anon_send(coord, executed_atom::value, list_stats{1, 0, 0.0});
    sched_.run();
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

v1::Request request(int rank, const std::string& name, int64_t length = 4);

// A float32 allreduce of `x` (caller-owned) from set rank 0.
tensor_entry_ptr entry(const std::string& name, std::vector<float>& x);

// The same collective submitted again, with a handle of its own.
tensor_entry_ptr again_of(const tensor_entry& e);

std::string request_list(std::vector<v1::Request> requests,
                         std::optional<v1::Tuning> tuning = std::nullopt);

v1::ResponseList parsed(const std::string& bytes);

tensor_entry_ptr entry_on(const std::string& name, std::vector<float>& x, v1::DeviceKind kind);

std::string response_on(const std::string& name, v1::DeviceKind kind);

} // namespace troupe::actors::protocol_test
