#pragma once

#include <string>

#include "troupe/v1/control.pb.h"

namespace troupe {

/// The response to a tensor whose requests are known to agree, built from
/// one of them: everything but an allgather's per-rank sizes (the
/// coordinator adds those), and for an allreduce or a broadcast the whole
/// response. A member that agreed on a cached one without the coordinator
/// builds it from its own request, so every member holds the same one.
v1::Response agreed_response_of(const std::string& name, const v1::Request& request);

/// Whether members may agree on `request`, once cached, among themselves
/// (the fast lane's arrival board): an allreduce or a broadcast outside a
/// group, whose whole response agreed_response_of() builds from a member's
/// own request. A grouped call waits for its whole group at the
/// coordinator; an allgather's response needs every rank's first
/// dimension.
bool agreed_without_coordinator(const v1::Request& request);

} // namespace troupe
