#pragma once

#include <cstdint>
#include <vector>

#include "troupe/v1/control.pb.h"

namespace troupe::coordinator {

/// Packs ready allreduce responses that can run as one collective (same
/// dtype, reduction and scale factors) into fused responses of at most
/// `threshold_bytes` (0 = no fusion); a tensor larger than the threshold
/// runs alone. Each fused response lists its tensors in order, with their
/// element counts in tensor_sizes. Buckets keep the order of their first
/// member; other responses pass through in place. Every rank receives the
/// result, so the order is the same everywhere.
std::vector<v1::Response> fuse(std::vector<v1::Response> ready, int64_t threshold_bytes);

} // namespace troupe::coordinator
