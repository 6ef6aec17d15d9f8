#pragma once

#include <cstdint>
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

/// What a member checks of one response of the coordinator before a
/// backend runs it: names, an error's code, and sizes that match the op and
/// the set's `set_size` members and that are neither negative nor beyond
/// 2^48 elements (the backends index and allocate by them). Empty when
/// fine.
std::string check_response(const v1::Response& r, int32_t set_size);

} // namespace troupe
