// Process-level calls: start/stop the runtime, identity, what this build has.
#include <string>
#include <utility>

#include <pybind11/stl.h>

#include "backends/registry.hpp"
#include "python/src/bindings.hpp"
#include "troupe/troupe.hpp"

namespace py = pybind11;

namespace troupe::python {

void bind_runtime(py::module_& m) {
  // init() waits for every peer and shutdown() for their acknowledgement:
  // other Python threads keep running meanwhile.
  m.def(
    "init",
    [] {
      const auto s = troupe::init();
      return std::make_pair(static_cast<int>(s.code()), s.message());
    },
    py::call_guard<py::gil_scoped_release>(),
    "Starts the runtime; returns (status code, message).");
  m.def("shutdown", &troupe::shutdown, py::call_guard<py::gil_scoped_release>());
  m.def("is_initialized", &troupe::is_initialized);
  m.def("rank", &troupe::rank);
  m.def("size", &troupe::size);
  m.def("local_rank", &troupe::local_rank);
  m.def("local_size", &troupe::local_size);
  m.def("cross_rank", &troupe::cross_rank);
  m.def("cross_size", &troupe::cross_size);
  m.def("built_cpu_backends", &backends::built_cpu_backends,
        "Names of the CPU backends compiled into this build.");
}

} // namespace troupe::python
