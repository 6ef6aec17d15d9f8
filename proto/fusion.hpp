#pragma once

#include <cstdint>
#include <vector>

#include "troupe/v1/control.pb.h"

namespace troupe {

/// Packs ready allreduce responses that can run as one collective (same
/// dtype, reduction and scale factors), and ready allgathers of one dtype,
/// into fused responses of at most `threshold_bytes` (0 = no fusion; for an
/// allgather, the bytes of the whole result count); a tensor larger than
/// the threshold runs alone. Each fused response lists its tensors in
/// order; tensor_sizes (and row_elements for allgathers) follow the same
/// order, tensor after tensor. Buckets keep the order of their first
/// member; other responses pass through in place. Every rank receives the
/// result, so the order is the same everywhere.
std::vector<v1::Response> fuse(std::vector<v1::Response> ready, int64_t threshold_bytes);

} // namespace troupe
