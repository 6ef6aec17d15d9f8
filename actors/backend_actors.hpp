#pragma once

#include <map>

#include "troupe/types.hpp"

namespace caf {
class actor;
}

namespace troupe::actors {

/// A process set's backend actors on this rank, one per device kind that
/// has a backend there; a work runs on the one of its response's
/// device_kind.
using backend_actors = std::map<device_kind, caf::actor>;

} // namespace troupe::actors
