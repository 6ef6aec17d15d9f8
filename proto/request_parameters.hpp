#pragma once

#include "troupe/v1/control.pb.h"

namespace troupe {

/// Whether two requests for one tensor ask for the same collective: every
/// field but the sender and the cache id agrees. The response cache keys
/// hits on it.
bool same_parameters(const v1::Request& a, const v1::Request& b);

} // namespace troupe
