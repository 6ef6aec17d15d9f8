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

/// fuse()'s buckets for allreduce and reducescatter requests (anything else
/// stands alone): indexes into `ready`, each bucket in order.
std::vector<std::vector<size_t>> fusion_groups(const std::vector<const v1::Request*>& ready,
                                               int64_t threshold_bytes);

/// Appends an allreduce or a reducescatter to a fused (or single) response
/// of its op when fuse() would put them in one bucket regardless of size
/// (same op, dtype, reduction and scale factors, no Adasum); false, and
/// `fused` unchanged, when not.
bool append_fusible(v1::Response& fused, const std::string& name, const v1::Request& request);

} // namespace troupe
