#include "api/process_runtime.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <unistd.h>

#include "troupe/troupe.hpp"
#include "workers/runtime.hpp"

namespace troupe {

using api::no_runtime;
using api::runtime_now;
using api::sigpipe_blocked;

namespace {

struct process_runtime {
  std::mutex mtx;
  std::shared_ptr<workers::runtime> rt;
  // Serialises init() calls (bootstrap takes a while; rank() and friends
  // keep answering from `rt` meanwhile).
  std::mutex init_mtx;
  // shutdown() calls so far: an init() that a shutdown() overtook does not
  // install its runtime.
  std::atomic<int> shutdowns{0};
  // Counts init() attempts that started a runtime, so that a re-init's
  // rendezvous keys never meet the previous run's (every rank re-inits the
  // same number of times).
  int starts = 0;
  // init() calls in progress: a child forked meanwhile has no runtime of
  // its own to start (it would be a second one of the same rank).
  int initializing = 0;
  // shutdown() calls stopping a runtime now: its handles still pending fail
  // only in this process, so a child forked meanwhile must fail its own.
  int stopping = 0;
  // Set in a child fork()ed from the process that runs `rt` (or was
  // starting it): the child has the runtime's memory but none of its
  // threads, so nothing it asks of the runtime would ever be answered.
  // The runtime's pid; a grandchild keeps it.
  pid_t forked_from = 0;
  // Taken at each fork, under `mtx`: the pid and identity the child keeps.
  pid_t pid_at_fork = 0;
  std::shared_ptr<const workers::identity> id_at_fork;
};

process_runtime& current() {
  static process_runtime instance;
  return instance;
}

// How the fork's errors begin (in a forked child only).
std::string forked_copy(const process_runtime& cur) {
  return "This process (pid " + std::to_string(::getpid()) + ") is a fork()ed copy of pid " +
         std::to_string(cur.forked_from) + " made after troupe::init()";
}

status no_runtime_locked(const process_runtime& cur) {
  if (cur.forked_from == 0)
    return {status_code::shut_down, "Troupe has not been initialized; use troupe::init()."};
  return {status_code::shut_down,
          forked_copy(cur) +
            "; the runtime's threads do not survive fork(), so its collectives and handles "
            "work only in pid " +
            std::to_string(cur.forked_from) +
            (cur.rt ? ". rank() and size() still answer here." : ".")};
}

// What a handle pending at the fork gives in the child.
status pending_at_fork() {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  return {status_code::shut_down, forked_copy(cur) +
                                    "; the operation was still running there, and its result "
                                    "reaches only pid " +
                                    std::to_string(cur.forked_from) + "."};
}

// What init() gives in a fork()ed child: nothing to do while the parent's
// runtime is there (is_initialized() says so; the calls that need it say
// why they cannot), else the fork's error. Empty elsewhere.
std::optional<status> init_in_forked_child() {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  if (cur.forked_from == 0)
    return std::nullopt;
  if (cur.rt)
    return status{};
  return no_runtime_locked(cur);
}

// Counts an init() in progress for the fork handlers.
class initializing {
public:
  initializing() {
    std::lock_guard<std::mutex> guard{current().mtx};
    ++current().initializing;
  }
  ~initializing() {
    std::lock_guard<std::mutex> guard{current().mtx};
    --current().initializing;
  }
  initializing(const initializing&) = delete;
  initializing& operator=(const initializing&) = delete;
};

// fork() while another thread holds `mtx` would leave it locked for good
// in the child: the fork waits for it instead. The identity is taken here
// because the runtime's own lock may be held at the fork.
void lock_before_fork() {
  auto& cur = current();
  cur.mtx.lock();
  if (cur.forked_from != 0)
    return;  // a child forking: its own child keeps what it has
  cur.pid_at_fork = ::getpid();
  cur.id_at_fork = cur.rt ? cur.rt->id() : nullptr;
}
void unlock_in_parent() {
  auto& cur = current();
  if (cur.forked_from == 0)
    cur.id_at_fork = nullptr;
  cur.mtx.unlock();
}
void unlock_in_child() {
  auto& cur = current();
  if ((cur.rt || cur.initializing > 0 || cur.stopping > 0) && cur.forked_from == 0)
    cur.forked_from = cur.pid_at_fork;
  if (cur.forked_from != 0)
    detail::handle_state::note_fork(pending_at_fork);
  cur.mtx.unlock();
}

void register_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(lock_before_fork, unlock_in_parent, unlock_in_child); });
}

void shutdown_at_exit() {
  // exit() has destroyed this thread's thread-locals before running the
  // handlers, CAF's current-logger pointer among them, which tearing an
  // actor system down sets again: stop it on a fresh thread.
  std::thread{[] { shutdown(); }}.join();
}

} // namespace

namespace api {

std::shared_ptr<workers::runtime> runtime_now() {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  return cur.forked_from != 0 ? nullptr : cur.rt;
}

status no_runtime() {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  return no_runtime_locked(cur);
}

std::shared_ptr<const workers::identity> identity_now() {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  if (cur.forked_from != 0)
    return cur.rt ? cur.id_at_fork : nullptr;
  return cur.rt ? cur.rt->id() : nullptr;
}

} // namespace api

namespace {

// Starts the runtime unless one runs; true in `started` when this call did.
status start_runtime(bool& started) {
  auto& cur = current();
  started = false;
  if (runtime_now())
    return {};
  const int shutdowns = cur.shutdowns;
  status result;
  std::shared_ptr<workers::runtime> rt;
  {
    sigpipe_blocked threads_started_here;
    rt = workers::runtime::start(result, cur.starts++);
  }
  // A runtime still running at exit() must stop before what it uses goes:
  // left to the destructor of `current()`'s static, which exists since
  // before the first start, it would stop after the statics created during
  // that start (spdlog's registry, whose logger the stopping actors still
  // use, and MPI, finalized by an atexit handler), and corrupt the heap.
  // Handlers run in reverse order of registration, so one registered after
  // the first start runs before all of those.
  static std::once_flag at_exit;
  if (rt)
    std::call_once(at_exit, [] { std::atexit(shutdown_at_exit); });
  {
    // Checked under the lock shutdown() takes after counting itself: either
    // it sees the runtime installed here, or this sees its count.
    std::unique_lock<std::mutex> guard{cur.mtx};
    if (!rt || cur.shutdowns == shutdowns) {
      cur.rt = std::move(rt);
      started = result.ok();
      return result;
    }
  }
  rt->stop();
  return {status_code::shut_down, "shutdown() was called while init() ran."};
}

} // namespace

status init() {
  return init(std::vector<std::vector<int>>{});
}

status init(const std::vector<std::vector<int>>& process_sets) {
  // Before init_mtx, which the parent may have held when it forked.
  if (auto forked = init_in_forked_child())
    return *forked;
  register_fork_handlers();
  initializing counted;
  // Held while the sets register, so a second init() cannot register them
  // again; rank() and shutdown() do not take it.
  std::lock_guard<std::mutex> serial{current().init_mtx};
  bool started = false;
  if (auto s = start_runtime(started); !s.ok() || !started)
    return s;  // harmless when running: the sets were registered the first time
  auto rt = runtime_now();
  sigpipe_blocked threads_started_here;
  for (const auto& ranks : process_sets) {
    int32_t id = 0;
    if (!rt)
      return no_runtime();
    if (auto s = rt->add_process_set(ranks, id); !s.ok()) {
      // As Horovod: sets that fail to register fail init(), which leaves
      // no runtime behind (every rank fails alike: registering is collective).
      shutdown();
      return s;
    }
  }
  return {};
}

void shutdown() {
  std::shared_ptr<workers::runtime> rt;
  {
    auto& cur = current();
    ++cur.shutdowns;
    std::lock_guard<std::mutex> guard{cur.mtx};
    rt = std::move(cur.rt);
    if (cur.forked_from != 0 && rt) {
      // The parent's runtime: stopping or destroying it here would wait for
      // threads this process does not have. Its memory goes with the process.
      static_cast<void>(new std::shared_ptr<workers::runtime>(std::move(rt)));
      return;
    }
    if (!rt)
      return;
    ++cur.stopping;
  }
  // Outside the lock: stopping takes a moment. Another thread still inside
  // a call holds its own reference, and that call fails at once: let it
  // return first (for a while), so that the runtime is destroyed here and
  // not by that thread, which would wait for the runtime's threads there,
  // maybe holding Python's GIL that one of them (an allocator) waits for.
  rt->stop();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (rt.use_count() > 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  rt.reset();
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  --cur.stopping;
}

// True in a child forked after init(), as Horovod's: the runtime it was
// given lives on in the parent (its calls say so).
bool is_initialized() {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  return cur.rt != nullptr;
}

} // namespace troupe
