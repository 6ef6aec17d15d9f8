#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/v1/control.pb.h"

namespace troupe {

/// The response to a tensor whose requests are known to agree, built from
/// one of them: everything but an allgather's per-rank sizes (the
/// coordinator adds those), and for an allreduce, a broadcast, an alltoall
/// or a reducescatter the whole response. A member that agreed on a cached one
/// without the coordinator builds it from its own request, so every member
/// holds the same one.
v1::Response agreed_response_of(const std::string& name, const v1::Request& request);

/// agreed_response_of() for an allgather whose ranks contribute
/// `first_dims[r]` rows each (in set-rank order): the whole response.
v1::Response agreed_allgather_of(const std::string& name, const v1::Request& request,
                                 const std::vector<int64_t>& first_dims);

/// Appends the fields a response carries per tensor for `request`: its
/// element count for an allreduce or a reducescatter (for fusion, and a
/// joined rank's zeros); for an allgather every rank's first dimension
/// (`first_dims`, in set-rank order; nothing while they are unknown), then
/// the elements of a row; nothing for any other op. Fused responses list
/// them tensor after tensor.
void append_sizes(v1::Response& resp, const v1::Request& request,
                  const std::vector<int64_t>& first_dims);

/// Whether members may agree on `request`, once cached, among themselves
/// (the fast lane's arrival board): an allreduce, a broadcast, an
/// allgather, an alltoall or a reducescatter outside a group. A member builds the response
/// from its own request (agreed_response_of; an alltoall's splits are not
/// negotiated), an allgather's with every rank's first dimension as the
/// response that cached it gave them. A grouped call waits for its whole
/// group at the coordinator.
bool agreed_without_coordinator(const v1::Request& request);

} // namespace troupe
