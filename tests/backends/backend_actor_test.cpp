// The backend actor over a backend whose completions the test finishes:
// answers come when a work's completion has finished, not when it started,
// and the actor keeps serving meanwhile (a GPU backend's path, on a CPU).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <caf/all.hpp>

#include "backends/backend_actor.hpp"
#include "metrics/rank_metrics.hpp"

namespace troupe::backends {
namespace {

using namespace troupe::actors;
using namespace std::chrono_literals;

// What the test controls and observes of the fake backend.
struct script {
  std::atomic<int> starts{0};
  std::atomic<int> polls{0};
  std::atomic<bool> aborted{false};
  // Works (by id) that run until their gate opens; the others finish at once.
  std::map<uint64_t, std::shared_ptr<std::atomic<bool>>> gates;
  // Works (by id) whose start() blocks until abort(), as a blocking library
  // waiting for a frozen peer does (10 s at most, so a test cannot hang).
  std::set<uint64_t> blocking;
  // Works (by id) whose library call fails at once.
  std::set<uint64_t> failing;
  // The thread of the last start() (read once it returned).
  std::thread::id started_on;
  // What backend::waits_end says of every work.
  bool waits_end = true;
};

class gated_completion : public completion {
public:
  gated_completion(std::shared_ptr<script> s, std::shared_ptr<std::atomic<bool>> gate)
    : script_(std::move(s)), gate_(std::move(gate)) {
  }
  std::optional<status> poll() override {
    ++script_->polls;
    if (script_->aborted)
      return status{status_code::backend, "device aborted"};
    if (*gate_)
      return status{};
    return std::nullopt;
  }

private:
  std::shared_ptr<script> script_;
  std::shared_ptr<std::atomic<bool>> gate_;
};

class scripted_backend : public backend {
public:
  explicit scripted_backend(std::shared_ptr<script> s) : script_(std::move(s)) {
  }
  const char* name() const override {
    return "scripted";
  }
  void connect() override {
  }
  std::unique_ptr<completion> start(collective_work& work) override {
    ++script_->starts;
    script_->started_on = std::this_thread::get_id();
    if (script_->blocking.count(work.id)) {
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (!script_->aborted && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(1ms);
      return std::make_unique<finished>(status{status_code::backend, "library call aborted"});
    }
    if (script_->failing.count(work.id))
      return std::make_unique<finished>(status{status_code::backend, "scripted failure"});
    const auto gate = script_->gates.find(work.id);
    if (gate == script_->gates.end())
      return std::make_unique<finished>(status{});
    return std::make_unique<gated_completion>(script_, gate->second);
  }
  void abort() override {
    script_->aborted = true;
  }
  bool waits_end(const collective_work&) const override {
    return script_->waits_end;
  }

private:
  std::shared_ptr<script> script_;
};

struct answer {
  uint64_t id = 0;
  status result;
  list_stats moved;
};

class backend_actor_test : public ::testing::Test {
protected:
  backend_actor_test()
    : sys_(cfg_),
      rank_metrics_(std::make_shared<metrics::rank_metrics>(metrics::rank_position{0, 2, 0},
                                                            "scripted")),
      set_(rank_metrics_->for_set(0, 2, "scripted")),
      script_(std::make_shared<script>()),
      data_(256, 1.0f) {
  }

  ~backend_actor_test() override {
    caf::anon_send_exit(backend_.actor, caf::exit_reason::user_shutdown);
  }

  void spawn(backend_actor_options options = {}) {
    backend_ = spawn_backend_actor(
      sys_, std::make_unique<scripted_backend>(script_),
      std::shared_ptr<metrics::collective_metrics>(set_, &set_->collectives()), options);
  }

  collective_work_ptr work(uint64_t id) {
    auto w = std::make_shared<collective_work>();
    w->id = id;
    w->response.set_op(v1::OP_TYPE_ALLREDUCE);
    auto e = std::make_shared<tensor_entry>();
    e->input = e->output =
      tensor{data_.data(), data_type::float32, {static_cast<int64_t>(data_.size())}};
    w->entries.push_back(e);
    return w;
  }

  // A work of `floats` 4-byte elements on `kind`.
  collective_work_ptr work(uint64_t id, size_t floats, device_kind kind) {
    auto w = work(id);
    w->entries[0]->input.shape = w->entries[0]->output.shape = {static_cast<int64_t>(floats)};
    w->response.set_device_kind(static_cast<v1::DeviceKind>(kind));
    return w;
  }

  // As the supervisor connects a set's backend.
  void connect(caf::scoped_actor& self) {
    std::optional<status> got;
    self->request(backend_.actor, caf::duration(5000ms), connect_atom::value)
      .receive([&](status& s) { got = s; }, [](caf::error&) {});
    ASSERT_TRUE(got && got->ok());
  }

  // Sends (execute) for `w` from `self`; the answer comes back as a message.
  void execute(caf::scoped_actor& self, const collective_work_ptr& w) {
    self->send(backend_.actor, execute_atom::value, w);
  }

  // After an abort for a lost peer (work 1 having been the only one
  // started), work 2 answers with the abort's status and is not started.
  void expect_not_started_after_abort(caf::scoped_actor& self) {
    execute(self, work(2));
    auto queued = next(self, 5000ms);
    ASSERT_TRUE(queued);
    EXPECT_EQ(queued->id, 2u);
    EXPECT_EQ(queued->result.code(), status_code::peer_lost);
    EXPECT_EQ(script_->starts.load(), 1);
  }

  // As the negotiator aborts a backend.
  void abort(const status& why) {
    caf::anon_send<caf::message_priority::high>(backend_.actor, abort_atom::value, why);
    backend_.interrupt();
  }

  // The next answer, or nothing after `within`.
  std::optional<answer> next(caf::scoped_actor& self, std::chrono::milliseconds within) {
    std::optional<answer> got;
    self->receive(
      [&](executed_atom, uint64_t id, const status& s, const list_stats& m) {
        got = answer{id, s, m};
      },
      caf::after(within) >> [] {});
    return got;
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  std::shared_ptr<metrics::rank_metrics> rank_metrics_;
  std::shared_ptr<metrics::set_metrics> set_;
  std::shared_ptr<script> script_;
  std::vector<float> data_;
  backend_ref backend_;
};

TEST_F(backend_actor_test, answers_when_the_completion_finishes_and_serves_meanwhile) {
  auto gate = std::make_shared<std::atomic<bool>>(false);
  script_->gates[1] = gate;
  spawn();
  caf::scoped_actor self{sys_};
  execute(self, work(1));
  execute(self, work(2));
  // Work 2 started after work 1 and finished first: its answer is not held
  // behind the one still running.
  auto first = next(self, 5000ms);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->id, 2u);
  EXPECT_TRUE(first->result.ok());
  EXPECT_EQ(first->moved.bytes, data_.size() * sizeof(float));
  // Work 1 runs on: no answer while its gate is shut, and the actor polls
  // with back-off rather than spinning.
  EXPECT_FALSE(next(self, 300ms));
  EXPECT_GT(script_->polls.load(), 2);
  EXPECT_LT(script_->polls.load(), 2000);  // 300 ms at >= 1 poll per ms cap ~ 300
  *gate = true;
  auto second = next(self, 5000ms);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->id, 1u);
  EXPECT_TRUE(second->result.ok());
  EXPECT_EQ(script_->starts.load(), 2);
}

// Bound or not (the answer before or after the handles), a success answers
// and completes its handle, finished at once or seen by a poll.
TEST_F(backend_actor_test, a_success_answers_and_completes_its_handles_bound_or_not) {
  for (const bool bound : {false, true}) {
    SCOPED_TRACE(bound ? "rank bound" : "unbound");
    script_ = std::make_shared<script>();
    auto gate = std::make_shared<std::atomic<bool>>(false);
    script_->gates[2] = gate;
    spawn({std::nullopt, bound, {}});
    caf::scoped_actor self{sys_};
    auto at_once = work(1);
    auto polled = work(2);
    execute(self, at_once);
    auto first = next(self, 5000ms);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->id, 1u);
    EXPECT_TRUE(at_once->entries[0]->handle->wait_for(5s));
    EXPECT_TRUE(at_once->entries[0]->handle->result().ok());
    execute(self, polled);
    EXPECT_FALSE(next(self, 50ms));
    EXPECT_FALSE(polled->entries[0]->handle->done());
    *gate = true;
    auto second = next(self, 5000ms);
    ASSERT_TRUE(second);
    EXPECT_EQ(second->id, 2u);
    EXPECT_TRUE(polled->entries[0]->handle->wait_for(5s));
    caf::anon_send_exit(backend_.actor, caf::exit_reason::user_shutdown);
  }
}

TEST_F(backend_actor_test, abort_finishes_running_works_through_the_backend_and_skips_queued) {
  script_->gates[1] = std::make_shared<std::atomic<bool>>(false);
  spawn();
  caf::scoped_actor self{sys_};
  execute(self, work(1));
  EXPECT_FALSE(next(self, 100ms));
  abort(status{status_code::peer_lost, "peer 1 lost"});
  // The running work answers with what the backend says once it let go.
  auto running = next(self, 5000ms);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->id, 1u);
  EXPECT_EQ(running->result.code(), status_code::backend);
  EXPECT_EQ(running->moved.bytes, 0u);
  expect_not_started_after_abort(self);
}

// The communicator that failed a work is not used again: the work queued
// behind it answers with that failure, unstarted, before any abort.
TEST_F(backend_actor_test, a_backend_failure_stops_the_works_queued_behind_it) {
  script_->failing.insert(1);
  spawn();
  caf::scoped_actor self{sys_};
  execute(self, work(1));
  execute(self, work(2));
  for (const uint64_t id : {1u, 2u}) {
    auto got = next(self, 5000ms);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->id, id);
    EXPECT_EQ(got->result.code(), status_code::backend);
    EXPECT_EQ(got->result.message(), "scripted failure");
  }
  EXPECT_EQ(script_->starts.load(), 1);
}

// A blocking library holds the actor's thread, so the (abort) message waits
// behind the work; the interrupt reaches the backend from another thread.
TEST_F(backend_actor_test, interrupt_ends_a_work_blocked_in_the_library) {
  script_->blocking.insert(1);
  spawn();
  caf::scoped_actor self{sys_};
  execute(self, work(1));
  EXPECT_FALSE(next(self, 100ms));
  const auto aborted = std::chrono::steady_clock::now();
  abort(status{status_code::peer_lost, "peer 1 lost"});
  auto blocked = next(self, 5000ms);
  ASSERT_TRUE(blocked);
  EXPECT_LT(std::chrono::steady_clock::now() - aborted, 2s);
  EXPECT_EQ(blocked->id, 1u);
  EXPECT_EQ(blocked->result.code(), status_code::backend);
  expect_not_started_after_abort(self);
}

// backend_ref::run_here: the negotiator's thread runs a small CPU work
// itself, once the backend is connected, and counts it as the actor would.
TEST_F(backend_actor_test, run_here_runs_a_small_cpu_work_on_the_callers_thread_once_connected) {
  spawn();
  caf::scoped_actor self{sys_};
  ASSERT_TRUE(backend_.run_here);
  EXPECT_FALSE(backend_.run_here(*work(1)));  // before (connect): the actor's
  EXPECT_EQ(script_->starts.load(), 0);
  connect(self);
  auto w = work(1, run_here_bytes / 4, device_kind::cpu);
  auto ran = backend_.run_here(*w);
  ASSERT_TRUE(ran);
  EXPECT_TRUE(ran->result.ok()) << ran->result.message();
  EXPECT_EQ(ran->moved.bytes, run_here_bytes);
  EXPECT_GE(ran->moved.seconds, 0.0);
  EXPECT_EQ(script_->starts.load(), 1);
  EXPECT_EQ(script_->started_on, std::this_thread::get_id());
  EXPECT_FALSE(w->entries[0]->handle->done());  // the negotiator's, in its order
  // A completion that is not finished at once is polled to the end.
  auto gate = std::make_shared<std::atomic<bool>>(false);
  script_->gates[2] = gate;
  std::thread opener([gate] {
    std::this_thread::sleep_for(50ms);
    *gate = true;
  });
  auto gated = backend_.run_here(*work(2));
  opener.join();
  ASSERT_TRUE(gated);
  EXPECT_TRUE(gated->result.ok());
  EXPECT_GE(gated->moved.seconds, 0.04);
  EXPECT_FALSE(next(self, 50ms));  // the actor answered nothing
}

TEST_F(backend_actor_test, run_here_leaves_larger_device_and_unbounded_works_to_the_actor) {
  spawn();
  caf::scoped_actor self{sys_};
  connect(self);
  EXPECT_FALSE(backend_.run_here(*work(1, run_here_bytes / 4 + 1, device_kind::cpu)));
  EXPECT_FALSE(backend_.run_here(*work(2, 1, device_kind::cuda)));
  script_->waits_end = false;  // a library call that may wait for ever (MPI's)
  EXPECT_FALSE(backend_.run_here(*work(3)));
  EXPECT_EQ(script_->starts.load(), 0);
}

// A backend error here leaves the communicator in no known state: nothing
// more runs here, and the actor answers the works behind it with that
// error, as after a failure on its own thread.
TEST_F(backend_actor_test, after_a_backend_error_here_the_actor_answers_with_it) {
  script_->failing.insert(1);
  spawn();
  caf::scoped_actor self{sys_};
  connect(self);
  auto failed = work(1);
  auto ran = backend_.run_here(*failed);
  ASSERT_TRUE(ran);
  EXPECT_EQ(ran->result.code(), status_code::backend);
  EXPECT_FALSE(failed->entries[0]->handle->done());  // the negotiator words the error
  EXPECT_FALSE(backend_.run_here(*work(2)));
  execute(self, work(2));
  auto got = next(self, 5000ms);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, 2u);
  EXPECT_EQ(got->result.message(), "scripted failure");
  EXPECT_EQ(script_->starts.load(), 1);
}

TEST_F(backend_actor_test, after_an_abort_nothing_runs_here) {
  spawn();
  caf::scoped_actor self{sys_};
  connect(self);
  abort(status{status_code::peer_lost, "peer 1 lost"});
  execute(self, work(1));  // answered after the abort: it was read
  auto got = next(self, 5000ms);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->result.code(), status_code::peer_lost);
  EXPECT_FALSE(backend_.run_here(*work(2)));
  EXPECT_EQ(script_->starts.load(), 0);
}

// A lost peer holds a work run here in the library: the interrupt (which
// the supervisor sends itself, the negotiator being the blocked thread)
// ends it.
TEST_F(backend_actor_test, interrupt_ends_a_work_run_here_blocked_in_the_library) {
  script_->blocking.insert(1);
  spawn();
  caf::scoped_actor self{sys_};
  connect(self);
  std::optional<ran_here> ran;
  std::thread negotiator([&] { ran = backend_.run_here(*work(1)); });
  std::this_thread::sleep_for(100ms);
  const auto interrupted = std::chrono::steady_clock::now();
  backend_.interrupt();
  negotiator.join();
  EXPECT_LT(std::chrono::steady_clock::now() - interrupted, 2s);
  ASSERT_TRUE(ran);
  EXPECT_EQ(ran->result.code(), status_code::backend);
  EXPECT_FALSE(backend_.run_here(*work(2)));
}

} // namespace
} // namespace troupe::backends
