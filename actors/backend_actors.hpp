#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <functional>
#include <map>
#include <optional>

#include "actors/protocols.hpp"
#include "troupe/types.hpp"

namespace troupe::actors {

/// What backend_ref::run_here did: as the actor's (executed) answer says.
struct ran_here {
  status result;
  list_stats moved;
};

/// A process set's backend of one device kind on this rank.
struct backend_ref {
  /// Runs the works, one after the other, on a thread of its own.
  backend_actor actor;
  /// Interrupts the work that thread is blocked in (backend::abort(), run on
  /// another thread; returns at once), for a lost peer. A blocking library
  /// keeps the actor from reading its mailbox, so an (abort) message alone
  /// would wait for the library's own timeout.
  std::function<void()> interrupt;
  /// Runs a small CPU work on the calling thread instead of the actor's,
  /// saving two thread hand-offs (docs/architecture.md, "Small works on the
  /// negotiator's thread"): the result, or nothing when this work may not
  /// run here (too large, not on the CPU, a library call that might wait
  /// for ever (backend::waits_end), the backend not yet connected or
  /// already aborted; send it to the actor then). Only while the actor runs
  /// nothing and has nothing queued: the backend is used from one thread
  /// at a time. Leaves the work's handles to the caller. Null where the
  /// backend offers none.
  std::function<std::optional<ran_here>(collective_work&)> run_here;
};

/// A process set's backends on this rank, one per device kind that has a
/// backend there; a work runs on the one of its response's device_kind.
using backend_actors = std::map<device_kind, backend_ref>;

} // namespace troupe::actors
