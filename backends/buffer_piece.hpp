#pragma once

#include <cstddef>
#include <vector>

namespace troupe::backends {

/// A part of a vector that a collective reads and writes where it lies in
/// the caller's memory: a fused allreduce's tensors, reduced as the
/// concatenation of their pieces without packing them into one buffer.
struct buffer_piece {
  void* data = nullptr;  // where the result goes
  size_t bytes = 0;
  /// Where this rank's contribution is read from, if not `data` (an
  /// allreduce into another tensor: no copy into it first).
  const void* input = nullptr;
};

using buffer_pieces = std::vector<buffer_piece>;

/// Pieces without owning them: a vector's, or a single one (a single
/// tensor's allreduce then allocates no vector).
class piece_span {
public:
  piece_span(const buffer_pieces& pieces) : first_(pieces.data()), size_(pieces.size()) {
  }
  piece_span(const buffer_piece& one) : first_(&one), size_(1) {
  }
  const buffer_piece* begin() const {
    return first_;
  }
  const buffer_piece* end() const {
    return first_ + size_;
  }
  size_t size() const {
    return size_;
  }
  const buffer_piece& operator[](size_t i) const {
    return first_[i];
  }

private:
  const buffer_piece* first_;
  size_t size_;
};

} // namespace troupe::backends
