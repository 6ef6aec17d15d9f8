#include "api/python/src/py_handle.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include <sys/mman.h>

#include <pybind11/stl.h>

#include "api/python/src/bindings.hpp"
#include "troupe/troupe.hpp"

namespace py = pybind11;

namespace troupe::python {

result_memory::~result_memory() {
  std::free(data);
}

namespace {

// A result this large comes from the kernel afresh on every call (past
// glibc's largest mmap threshold) and is written whole at once: in 2 MiB
// pages where the kernel has them (madvise mode), one page fault per 2 MiB
// instead of one per 4 KiB. The round-up wastes under 6 % at most.
constexpr size_t huge_from = size_t{32} << 20;
constexpr size_t huge_page = size_t{2} << 20;

// `bytes` (> 0) of memory aligned to 64 bytes (to a huge page from
// huge_from on), or null.
void* result_block(size_t bytes) {
  if (bytes < huge_from) {
    constexpr size_t alignment = 64;
    return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  }
  const size_t size = (bytes + huge_page - 1) / huge_page * huge_page;
  void* block = std::aligned_alloc(huge_page, size);
  if (block != nullptr)
    ::madvise(block, size, MADV_HUGEPAGE);  // a hint: without THP, small pages
  return block;
}

// Gives `r` a block of `bytes` (none for a result of no bytes) for a
// result of `shape`.
void allocate(result_memory& r, size_t bytes, shape_t shape) {
  if (bytes > 0) {
    r.data = result_block(bytes);
    if (r.data == nullptr)
      throw std::bad_alloc();
  }
  r.bytes = bytes;
  r.shape = std::move(shape);
  r.allocated = true;
}

// Memory for a CPU output the caller sizes itself (an allreduce into a new
// tensor, a broadcast's copy), as a result's: the Python side wraps it
// with torch.frombuffer.
result_ptr cpu_memory(size_t bytes) {
  auto r = std::make_shared<result_memory>();
  allocate(*r, bytes, {static_cast<int64_t>(bytes)});
  return r;
}

} // namespace

output_allocator cpu_allocator(const result_ptr& into, data_type dtype) {
  const size_t element_bytes = element_size(dtype);
  return [into, element_bytes](const shape_t& shape) -> void* {
    const auto bytes = static_cast<size_t>(num_elements(shape)) * element_bytes;
    if (into->allocated)
      throw std::runtime_error("a result allocated twice");
    allocate(*into, bytes, shape);
    return into->data;
  };
}

output_allocator python_allocator(const py_callable& fn) {
  std::weak_ptr<py::object> weak = fn;
  return [weak](const shape_t& shape) -> void* {
    py::gil_scoped_acquire gil;
    // Released before the GIL (reverse order): a last reference dies under it.
    const auto alive = weak.lock();
    if (!alive)
      throw std::runtime_error("the Python operation owning this result is gone");
    try {
      return reinterpret_cast<void*>((*alive)(shape).cast<uintptr_t>());
    } catch (const py::error_already_set& e) {
      throw std::runtime_error(e.what());
    }
  };
}

namespace {

// What a handle dropped before its collective finished still lends the
// runtime: the memory it reads or writes and the callables allocating its
// results. Held here until the runtime lets go, never waited for: the
// collective may only finish when another rank submits, or never (a
// KeyboardInterrupt left the handle behind), and a destructor that blocked
// would hang the interpreter beyond the reach of Ctrl-C.
struct orphan {
  std::vector<handle> members;
  py::object keep_alive;
  std::vector<py_callable> allocators;

  bool done() const {
    return std::all_of(members.begin(), members.end(),
                       [](const handle& h) { return h.poll(); });
  }
};

// Touched only with the GIL held. Never destroyed: Python objects must not
// outlive the interpreter's finalisation in a static destructor.
std::vector<orphan>& orphans() {
  static auto* held = new std::vector<orphan>();
  return *held;
}

// Releases (under the GIL) what finished orphans held. They leave the list
// first and die after: a decref may run Python code (__del__, weakref
// callbacks) that makes or drops a handle, and so comes back here.
void release_finished_orphans() {
  auto& held = orphans();
  const auto finished =
    std::stable_partition(held.begin(), held.end(), [](const orphan& o) { return !o.done(); });
  std::vector<orphan> released(std::make_move_iterator(finished),
                               std::make_move_iterator(held.end()));
  held.erase(finished, held.end());
}

} // namespace

size_t orphaned_operations() {
  release_finished_orphans();
  return orphans().size();
}

py_handle::py_handle(std::vector<handle> members, py::object keep_alive,
                     std::vector<py_callable> allocators, std::vector<result_ptr> results)
  : members_(std::move(members)), keep_alive_(std::move(keep_alive)),
    allocators_(std::move(allocators)), results_(std::move(results)) {
  release_finished_orphans();
}

py_handle::~py_handle() {
  release_finished_orphans();
  if (!poll() && (!keep_alive_.is_none() || !allocators_.empty()))
    orphans().push_back({std::move(members_), std::move(keep_alive_), std::move(allocators_)});
}

bool py_handle::poll() const {
  for (const auto& h : members_)
    if (!h.poll())
      return false;
  return true;
}

void py_handle::wait() const {
  for (const auto& h : members_) {
    for (;;) {
      {
        py::gil_scoped_release release;
        h.wait_for(signal_check_interval);
      }
      if (h.poll())
        break;
      if (PyErr_CheckSignals() != 0)
        throw py::error_already_set();
    }
  }
}

std::pair<int, std::string> py_handle::result() const {
  for (const auto& h : members_) {
    auto s = h.result();
    if (!s.ok())
      return {static_cast<int>(s.code()), s.message()};
  }
  return {0, {}};
}

const handle& py_handle::member(size_t i) const {
  if (i >= members_.size())
    throw py::index_error("member " + std::to_string(i) + " of a handle with " +
                          std::to_string(members_.size()));
  return members_[i];
}

std::vector<int64_t> py_handle::received_splits(size_t i) const {
  return member(i).received_splits();
}

py::tuple py_handle::allocated_result(size_t i) const {
  if (!member(i).poll())
    throw std::logic_error("the result of a collective that has not completed");
  const auto& r = i < results_.size() ? results_[i] : nullptr;
  if (!r || !r->allocated)
    throw std::logic_error("member " + std::to_string(i) + " has no result the runtime allocated");
  py::object memory = py::none();
  if (r->bytes > 0)
    memory = py::cast(r);
  return py::make_tuple(memory, r->shape);
}

int py_handle::join_result() const {
  return troupe::join_result(member(0));
}

void bind_handle(py::module_& m) {
  m.def("_orphaned_operations", &orphaned_operations,
        "Operations whose handle was dropped while the runtime still used their memory "
        "(held until it lets go)");
  py::class_<result_memory, result_ptr>(m, "ResultMemory", py::buffer_protocol())
    .def_buffer([](result_memory& r) {
      return py::buffer_info(r.data, 1, py::format_descriptor<uint8_t>::format(), 1,
                             {static_cast<py::ssize_t>(r.bytes)}, {py::ssize_t{1}},
                             /*readonly=*/false);
    });
  m.def("cpu_memory", &cpu_memory, py::arg("nbytes"),
        "Uninitialised memory as a CPU result gets it (huge pages from huge_result_bytes on)");
  m.attr("huge_result_bytes") = huge_from;
  py::class_<py_handle>(m, "Handle")
    .def("poll", &py_handle::poll)
    .def("wait", &py_handle::wait)
    .def("result", &py_handle::result)
    .def("members", &py_handle::members)
    .def("received_splits", &py_handle::received_splits)
    .def("result_memory", &py_handle::allocated_result)
    .def("join_result", &py_handle::join_result);
}

} // namespace troupe::python
