#pragma once

// This process's one runtime, as a Horovod-style init()/shutdown() API
// requires (itself the root of all actor state), and what fork() does to
// it; init(), shutdown() and is_initialized() are defined with it
// (process_runtime.cpp). Its mutex guards only that pointer: every call
// copies it and lets go, so no call holds a process-wide lock while it
// waits for other ranks.

#include <csignal>
#include <memory>

#include <pthread.h>

#include "troupe/status.hpp"

namespace troupe::workers {
class runtime;
struct identity;
} // namespace troupe::workers

namespace troupe::api {

/// The runtime calls may use; none before init(), after shutdown(), or in
/// a child fork()ed after init().
std::shared_ptr<workers::runtime> runtime_now();

/// Why runtime_now() gave none (status_code::shut_down).
status no_runtime();

/// This rank's identity, also in a fork()ed child (the parent's at the
/// fork: a data loader's worker asking for its rank); null without a
/// runtime.
std::shared_ptr<const workers::identity> identity_now();

// Held around every call that may start runtime threads, which inherit the
// caller's signal mask: with SIGPIPE blocked in them, a write into a
// connection a dead peer left (Gloo writes without MSG_NOSIGNAL) fails
// with EPIPE, which the runtime reports, instead of killing the process. A
// C++ program's SIGPIPE kills by default (troupe-run restores it for its
// workers); Python ignores it. The application's own threads keep theirs.
class sigpipe_blocked {
public:
  sigpipe_blocked() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &before_);
  }
  ~sigpipe_blocked() {
    pthread_sigmask(SIG_SETMASK, &before_, nullptr);
  }
  sigpipe_blocked(const sigpipe_blocked&) = delete;
  sigpipe_blocked& operator=(const sigpipe_blocked&) = delete;

private:
  sigset_t before_;
};

} // namespace troupe::api
