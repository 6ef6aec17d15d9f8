#include "api/python/src/py_handle.hpp"

#include <stdexcept>

#include <pybind11/stl.h>

#include "api/python/src/bindings.hpp"
#include "troupe/troupe.hpp"

namespace py = pybind11;

namespace troupe::python {

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

py_handle::py_handle(std::vector<handle> members, py::object keep_alive,
                     std::vector<py_callable> allocators)
  : members_(std::move(members)), keep_alive_(std::move(keep_alive)),
    allocators_(std::move(allocators)) {
}

py_handle::~py_handle() {
  if (!poll() && (!keep_alive_.is_none() || !allocators_.empty())) {
    py::gil_scoped_release release;
    for (const auto& h : members_)
      h.wait();
  }
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

int py_handle::join_result() const {
  return troupe::join_result(member(0));
}

void bind_handle(py::module_& m) {
  py::class_<py_handle>(m, "Handle")
    .def("poll", &py_handle::poll)
    .def("wait", &py_handle::wait)
    .def("result", &py_handle::result)
    .def("members", &py_handle::members)
    .def("received_splits", &py_handle::received_splits)
    .def("join_result", &py_handle::join_result);
}

} // namespace troupe::python
