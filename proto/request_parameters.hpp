#pragma once

#include "troupe/v1/control.pb.h"

namespace troupe {

/// Whether two requests for one tensor ask for the same collective: every
/// field but the sender and the cache id agrees. The response cache keys
/// hits on it.
bool same_parameters(const v1::Request& a, const v1::Request& b);

/// The same but for the device ordinal: two ranks' requests that the
/// coordinator answers alike (it never reads the ordinal, which only the
/// member's own cache view compares), so a control-tree node may merge
/// them although each rank's tensor lives on its own GPU.
bool same_collective(const v1::Request& a, const v1::Request& b);

} // namespace troupe
