#pragma once

#include <string>

#include "troupe/v1/control.pb.h"

namespace troupe {

/// The response to a tensor whose requests are known to agree, built from
/// one of them: everything but an allgather's per-rank sizes (the
/// coordinator adds those), and for an allreduce the whole response. A
/// member that agreed on a cached allreduce without the coordinator builds
/// it from its own request, so every member holds the same one.
v1::Response agreed_response_of(const std::string& name, const v1::Request& request);

} // namespace troupe
