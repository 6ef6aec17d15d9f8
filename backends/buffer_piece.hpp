#pragma once

#include <cstddef>
#include <vector>

namespace troupe::backends {

/// A part of a vector that a collective reads and writes where it lies in
/// the caller's memory: a fused allreduce's tensors, reduced as the
/// concatenation of their pieces without packing them into one buffer.
struct buffer_piece {
  void* data = nullptr;
  size_t bytes = 0;
};

using buffer_pieces = std::vector<buffer_piece>;

} // namespace troupe::backends
