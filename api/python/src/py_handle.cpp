#include "api/python/src/py_handle.hpp"

#include <cstring>
#include <stdexcept>

#include <pybind11/stl.h>

#include "api/python/src/bindings.hpp"
#include "troupe/troupe.hpp"

namespace py = pybind11;

namespace troupe::python {

py_handle::py_handle(std::vector<handle> members, py::object keep_alive)
  : members_(std::move(members)), keep_alive_(std::move(keep_alive)) {
}

py_handle::~py_handle() {
  if (!poll()) {
    py::gil_scoped_release release;
    wait();
  }
}

bool py_handle::poll() const {
  for (const auto& h : members_)
    if (!h.poll())
      return false;
  return true;
}

void py_handle::wait() const {
  for (const auto& h : members_)
    h.wait();
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

shape_t py_handle::output_shape(size_t i) const {
  return member(i).output_shape();
}

void py_handle::copy_output(size_t i, uintptr_t dst, size_t nbytes) const {
  const auto& out = member(i).output();
  if (out.size() != nbytes)
    throw std::length_error("result of member " + std::to_string(i) + " has " +
                            std::to_string(out.size()) + " bytes, destination " +
                            std::to_string(nbytes));
  if (nbytes > 0)
    std::memcpy(reinterpret_cast<void*>(dst), out.data(), nbytes);
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
    .def("wait", &py_handle::wait, py::call_guard<py::gil_scoped_release>())
    .def("result", &py_handle::result)
    .def("members", &py_handle::members)
    .def("output_shape", &py_handle::output_shape)
    .def("copy_output", &py_handle::copy_output, py::arg("member"), py::arg("dst"),
         py::arg("nbytes"))
    .def("received_splits", &py_handle::received_splits)
    .def("join_result", &py_handle::join_result);
}

} // namespace troupe::python
