#pragma once

#include <cstdint>

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

/// The end of the set ranks a request speaks for: its hit_ranks_end, else
/// the sender alone. In 64 bits, so that a rank of INT32_MAX has an end.
inline int64_t ranks_end(const v1::Request& r) {
  return r.hit_ranks_end() > 0 ? r.hit_ranks_end() : int64_t{r.request_rank()} + 1;
}

} // namespace troupe
