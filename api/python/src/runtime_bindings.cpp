// Process-level calls: start/stop the runtime, identity, what this build has.
#include <string>
#include <tuple>
#include <vector>
#include <utility>

#include <pybind11/stl.h>

#include "backends/registry.hpp"
#include "api/python/src/bindings.hpp"
#include "troupe/troupe.hpp"

namespace py = pybind11;

namespace troupe::python {

namespace {

std::pair<int, std::string> code_and_message(const status& s) {
  return {static_cast<int>(s.code()), s.message()};
}

} // namespace

void bind_runtime(py::module_& m) {
  // init() waits for every peer and shutdown() for their acknowledgement:
  // other Python threads keep running meanwhile.
  m.def(
    "init",
    [] { return code_and_message(troupe::init()); },
    py::call_guard<py::gil_scoped_release>(),
    "Starts the runtime; returns (status code, message).");
  m.def(
    "init_with_process_sets",
    [](const std::vector<std::vector<int>>& sets) { return code_and_message(troupe::init(sets)); },
    py::arg("process_sets"), py::call_guard<py::gil_scoped_release>(),
    "init(), then registers static process sets; returns (status code, message).");
  m.def(
    "add_process_set",
    [](const std::vector<int>& ranks) {
      process_set set;
      auto [code, message] = code_and_message(troupe::add_process_set(ranks, set));
      return std::make_tuple(code, message, set.id, set.ranks);
    },
    py::arg("ranks"), py::call_guard<py::gil_scoped_release>(),
    "Collective over every rank; returns (status code, message, id, sorted ranks).");
  m.def(
    "remove_process_set",
    [](int32_t id) { return code_and_message(troupe::remove_process_set(process_set{id, {}})); },
    py::arg("process_set_id"), py::call_guard<py::gil_scoped_release>(),
    "Collective over every rank; returns (status code, message).");
  m.def("shutdown", &troupe::shutdown, py::call_guard<py::gil_scoped_release>());
  m.def(
    "reset", [] { return code_and_message(troupe::reset()); },
    py::call_guard<py::gil_scoped_release>(),
    "In-place reset to the next membership epoch; returns (status code, message).");
  m.def("epoch", &troupe::epoch);
  m.def(
    "hosts_updated", [] { return static_cast<int>(troupe::hosts_updated()); },
    py::call_guard<py::gil_scoped_release>(),
    "Elastic jobs: 0 none, 1 added, 2 removed, 3 mixed (announced during this epoch).");
  m.def("epoch_has_newcomers", &troupe::epoch_has_newcomers,
        "Elastic jobs: whether a member of this epoch never served before.");
  m.def("is_initialized", &troupe::is_initialized);
  m.def("rank", &troupe::rank);
  m.def("size", &troupe::size);
  m.def("local_rank", &troupe::local_rank);
  m.def("local_size", &troupe::local_size);
  m.def("cross_rank", &troupe::cross_rank);
  m.def("cross_size", &troupe::cross_size);
  m.def(
    "start_timeline",
    [](const std::string& path, bool mark_cycles) {
      return code_and_message(troupe::start_timeline(path, mark_cycles));
    },
    py::arg("path"), py::arg("mark_cycles"), py::call_guard<py::gil_scoped_release>(),
    "Returns (status code, message).");
  m.def(
    "stop_timeline", [] { return code_and_message(troupe::stop_timeline()); },
    py::call_guard<py::gil_scoped_release>(), "Returns (status code, message).");
  m.def("mpi_enabled", &troupe::mpi_enabled, "Whether this job's CPU collectives run on MPI.");
  m.def("gloo_enabled", &troupe::gloo_enabled, "Whether this job's CPU collectives run on Gloo.");
  m.def("mpi_threads_supported", &troupe::mpi_threads_supported,
        "1: MPI_THREAD_MULTIPLE, 0: MPI_THREAD_SERIALIZED, -1: MPI not enabled.");
  m.def("built_cpu_backends", &backends::built_cpu_backends,
        "Names of the CPU backends compiled into this build.");
  m.def("cuda_built", &backends::cuda_built, "Whether this build takes CUDA tensors.");
  m.def("nccl_version", &backends::nccl_version,
        "NCCL_VERSION_CODE of the NCCL backend's headers; 0 without one.");
}

} // namespace troupe::python
