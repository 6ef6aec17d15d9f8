#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

#include "troupe/handle.hpp"

namespace troupe::python {

/// A Python callable that allocates a result, shared with the runtime only
/// through weak references (see python_allocator).
using py_callable = std::shared_ptr<pybind11::object>;

/// The output_allocator that calls `fn(shape)` for the data pointer of a
/// result. It runs on a backend thread and takes the GIL for the call; the
/// Python caller meanwhile waits with the GIL released (Handle.wait). It
/// holds `fn` weakly, so the runtime may drop it on any thread without the
/// GIL; `fn` itself belongs to the py_handle, released with it under the GIL.
output_allocator python_allocator(const py_callable& fn);

/// A CPU result the runtime allocates on its backend thread without the
/// GIL (cpu_allocator): 64-byte aligned memory that the Python side wraps
/// as a tensor without copying once the collective completed
/// (py_handle::allocated_result). Taking the GIL there instead would hold
/// the backend's every collective until the interpreter lets go of it (up
/// to its 5 ms switch interval while another thread runs Python code).
struct result_memory {
  result_memory() = default;
  result_memory(const result_memory&) = delete;
  result_memory& operator=(const result_memory&) = delete;
  ~result_memory();

  void* data = nullptr;  // null for a result of no bytes
  size_t bytes = 0;
  shape_t shape;
  bool allocated = false;
};
using result_ptr = std::shared_ptr<result_memory>;

/// The output_allocator that allocates a result of `dtype` into `into`.
output_allocator cpu_allocator(const result_ptr& into, data_type dtype);

/// Operations whose py_handle is gone but whose memory the runtime still
/// uses (see ~py_handle); releases those that finished first. Call with
/// the GIL.
size_t orphaned_operations();

/// One Python-level operation: the handles of its members (one, or one per
/// tensor of a grouped collective), the Python objects whose memory the
/// runtime reads or writes, and the callables allocating its results, held
/// until every member has completed.
class py_handle {
public:
  py_handle(std::vector<handle> members, pybind11::object keep_alive,
            std::vector<py_callable> allocators = {}, std::vector<result_ptr> results = {});

  /// A handle dropped while its collective still runs hands the memory the
  /// runtime uses (and its result allocators) to a list released once the
  /// collective finishes, so the runtime never writes into freed memory and
  /// the caller never blocks here. Call with the GIL.
  ~py_handle();

  py_handle(const py_handle&) = delete;
  py_handle& operator=(const py_handle&) = delete;

  bool poll() const;
  /// Call with the GIL: waits with it released, and every
  /// signal_check_interval takes it to run Python's signal handlers, so
  /// Ctrl-C raises KeyboardInterrupt (error_already_set) while the
  /// collective goes on.
  void wait() const;
  static constexpr std::chrono::milliseconds signal_check_interval{50};
  /// (code, message) of the first member that failed, (0, "") otherwise.
  std::pair<int, std::string> result() const;

  size_t members() const {
    return members_.size();
  }
  std::vector<int64_t> received_splits(size_t member) const;
  /// (memory, shape) of member `i`'s result where cpu_allocator allocated
  /// it: memory is a writable buffer that keeps it alive (None for no
  /// bytes). Only after the collective completed.
  pybind11::tuple allocated_result(size_t member) const;
  int join_result() const;

private:
  const handle& member(size_t i) const;

  std::vector<handle> members_;
  pybind11::object keep_alive_;
  std::vector<py_callable> allocators_;
  std::vector<result_ptr> results_;  // by member, where cpu_allocator allocates
};

} // namespace troupe::python
