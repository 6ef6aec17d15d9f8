#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/v1/control.pb.h"

namespace troupe {

/// Packs ready allreduce responses that can run as one collective (same
/// dtype, reduction, scale factors and device kind), reducescatters alike,
/// and ready allgathers of one dtype and device kind,
/// into fused responses of at most `threshold_bytes` (0 = no fusion; for an
/// allgather, the bytes of the whole result count); a tensor larger than
/// the threshold runs alone. Each fused response lists its tensors in
/// order; tensor_sizes (and row_elements for allgathers) follow the same
/// order, tensor after tensor. Buckets keep the order of their first
/// member; other responses pass through in place. Every rank receives the
/// result, so the order is the same everywhere.
std::vector<v1::Response> fuse(std::vector<v1::Response> ready, int64_t threshold_bytes);

/// fuse() where ready[a] and ready[b] share a bucket only if
/// only_within[a] == only_within[b] (one entry per response; empty: no
/// limit): with each grouped call's group name and each other tensor's own
/// name, groups never fuse with each other (Horovod's
/// HOROVOD_DISABLE_GROUP_FUSION).
std::vector<v1::Response> fuse(std::vector<v1::Response> ready, int64_t threshold_bytes,
                               const std::vector<std::string>& only_within);

/// What `request` counts toward the fusion threshold, as fuse() counts its
/// response: its input's bytes; for an allgather, its whole result's, with
/// `first_dims` every rank's first dimension in set-rank order.
int64_t fusion_bytes(const v1::Request& request, const std::vector<int64_t>& first_dims);

/// fuse()'s buckets for requests of `bytes[i]` bytes each (fusion_bytes):
/// allreduces, reducescatters and allgathers (anything else stands alone);
/// indexes into `ready`, each bucket in order.
std::vector<std::vector<size_t>> fusion_groups(const std::vector<const v1::Request*>& ready,
                                               const std::vector<int64_t>& bytes,
                                               int64_t threshold_bytes);

/// Appends the agreed response to `request` (agreed_response_of; an
/// allgather's with every rank's `first_dims`) to a fused (or single)
/// response of its op, as fuse() lays it out, when fuse() would put them in
/// one bucket regardless of size (same op, dtype, reduction and scale
/// factors, no Adasum); false, and `fused` unchanged, when not (or an
/// allgather comes without first dimensions).
bool append_agreed(v1::Response& fused, const std::string& name, const v1::Request& request,
                   const std::vector<int64_t>& first_dims);

} // namespace troupe
