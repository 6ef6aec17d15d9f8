#pragma once

#include <string>

#include "troupe/v1/control.pb.h"

namespace troupe {

/// What one request must satisfy whatever the other members sent: a name,
/// a known op, dtype and reduction, no negative dimension or device
/// ordinal, and what its op needs of them (Horovod's texts where it has
/// them). The one routine both sides use: the API before anything is sent,
/// the coordinator for every request that arrives, so a malformed message
/// fails its collective instead of reaching a backend. Empty when fine.
std::string check_request(const v1::Request& r);

} // namespace troupe
