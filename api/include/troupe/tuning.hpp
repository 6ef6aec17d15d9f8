#pragma once

#include <cstdint>
#include <optional>

namespace troupe {

/// Settings of one process set that can change while the job runs (see
/// troupe::tune). Unset fields keep their current value.
struct tuning {
  /// Bytes of tensors fused into one collective; 0 = no fusion.
  std::optional<int64_t> fusion_threshold_bytes;
  /// Minimum milliseconds between two response lists; 0 = event-driven.
  std::optional<double> cycle_time_ms;
  /// Response cache entries; 0 = off. A change empties the cache.
  std::optional<int64_t> cache_capacity;
  /// Bytes of a CPU allreduce reduced at a time, and the batches of fused
  /// reducescatters (TROUPE_FUSION_CHUNK_BYTES);
  /// 0 = at once, -1 = the configured chunk again (TROUPE_FUSION_CHUNK_BYTES,
  /// or the communicator's choice).
  std::optional<int64_t> fusion_chunk_bytes;
};

} // namespace troupe
