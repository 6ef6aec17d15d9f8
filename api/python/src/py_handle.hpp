#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

#include "troupe/handle.hpp"

namespace troupe::python {

/// One Python-level operation: the handles of its members (one, or one per
/// tensor of a grouped collective) and the Python objects whose memory the
/// runtime reads or writes, held until every member has completed.
class py_handle {
public:
  py_handle(std::vector<handle> members, pybind11::object keep_alive);

  /// A handle dropped while its collective still runs waits for it, so the
  /// runtime never writes into freed memory.
  ~py_handle();

  py_handle(const py_handle&) = delete;
  py_handle& operator=(const py_handle&) = delete;

  bool poll() const;
  /// Call without the GIL.
  void wait() const;
  /// (code, message) of the first member that failed, (0, "") otherwise.
  std::pair<int, std::string> result() const;

  size_t members() const {
    return members_.size();
  }
  shape_t output_shape(size_t member) const;
  /// Copies a member's result bytes to `dst`, which holds `nbytes`.
  void copy_output(size_t member, uintptr_t dst, size_t nbytes) const;
  std::vector<int64_t> received_splits(size_t member) const;
  int join_result() const;

private:
  const handle& member(size_t i) const;

  std::vector<handle> members_;
  pybind11::object keep_alive_;
};

} // namespace troupe::python
