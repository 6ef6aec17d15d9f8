#pragma once

#include <cstdint>

namespace troupe::autotune {

/// The settings of one process set that the tuner searches.
struct settings {
  int64_t fusion_threshold = 0;  // bytes; 0 = no fusion
  double cycle_time_ms = 0;
  bool cache_enabled = true;
  // Bytes of a CPU allreduce reduced at a time; 0 = at once, -1 = the
  // configured chunk (TROUPE_FUSION_CHUNK_BYTES, or the communicator's).
  int64_t fusion_chunk_bytes = -1;

  bool operator==(const settings& o) const {
    return fusion_threshold == o.fusion_threshold && cycle_time_ms == o.cycle_time_ms &&
           cache_enabled == o.cache_enabled && fusion_chunk_bytes == o.fusion_chunk_bytes;
  }
  bool operator!=(const settings& o) const {
    return !(*this == o);
  }
};

/// A setting and the score (bytes per second) it got.
struct scored_setting {
  settings setting;
  double score = 0;
};

} // namespace troupe::autotune
