#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <map>

#include "actors/protocols.hpp"
#include "troupe/types.hpp"

namespace troupe::actors {

/// A process set's backend actors on this rank, one per device kind that
/// has a backend there; a work runs on the one of its response's
/// device_kind.
using backend_actors = std::map<device_kind, backend_actor>;

} // namespace troupe::actors
