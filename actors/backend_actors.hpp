#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <functional>
#include <map>

#include "actors/protocols.hpp"
#include "troupe/types.hpp"

namespace troupe::actors {

/// A process set's backend of one device kind on this rank.
struct backend_ref {
  /// Runs the works, one after the other, on a thread of its own.
  backend_actor actor;
  /// Interrupts the work that thread is blocked in (backend::abort(), run on
  /// another thread; returns at once), for a lost peer. A blocking library
  /// keeps the actor from reading its mailbox, so an (abort) message alone
  /// would wait for the library's own timeout.
  std::function<void()> interrupt;
};

/// A process set's backends on this rank, one per device kind that has a
/// backend there; a work runs on the one of its response's device_kind.
using backend_actors = std::map<device_kind, backend_ref>;

} // namespace troupe::actors
