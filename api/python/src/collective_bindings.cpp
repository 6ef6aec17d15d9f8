// Collectives. A tensor arrives as (data pointer, dtype code, shape): the
// caller guarantees a contiguous buffer and passes the objects owning it
// as `keep_alive`, which the returned handle holds until completion. Its
// device is `device`: None for CPU memory, else (CUDA ordinal, pointer of a
// cudaEvent_t recorded on the producer's stream at submission or 0, the
// object owning that event), held by the handle too; a call's tensors share
// one device. No framework header is needed: the Python side reads them. A
// result sized by negotiation goes to memory from `allocate` (one per member
// when grouped): a Python callable `allocate(shape)` returning a data
// pointer, or None for the runtime's own memory (cpu_allocator; the Python
// side takes it with Handle.result_memory).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "api/python/src/bindings.hpp"
#include "api/python/src/py_handle.hpp"
#include "troupe/troupe.hpp"

namespace py = pybind11;

namespace troupe::python {

namespace {

using handle_ptr = std::unique_ptr<py_handle>;

tensor_device on(const py::object& device) {
  if (device.is_none())
    return tensor_device::cpu();
  const auto t = device.cast<py::tuple>();
  if (t.size() != 3)
    throw py::value_error("device: expected None or (ordinal, event pointer, event owner)");
  return tensor_device::cuda(t[0].cast<int32_t>(), nullptr,
                             reinterpret_cast<void*>(t[1].cast<uintptr_t>()));
}

tensor view(uintptr_t data, int dtype, shape_t shape, const py::object& device) {
  return {reinterpret_cast<void*>(data), static_cast<data_type>(dtype), std::move(shape),
          on(device)};
}

std::vector<tensor> views(const std::vector<uintptr_t>& data, const std::vector<int>& dtypes,
                          const std::vector<shape_t>& shapes, const py::object& device) {
  if (data.size() != dtypes.size() || data.size() != shapes.size())
    throw py::value_error("pointer, dtype and shape lists differ in length");
  std::vector<tensor> out;
  out.reserve(data.size());
  for (size_t i = 0; i < data.size(); ++i)
    out.push_back(view(data[i], dtypes[i], shapes[i], device));
  return out;
}

// The runtime knows each set's ranks: the id is all a collective needs.
process_set in_set(int32_t id) {
  return process_set{id, {}};
}

// The handle keeps the tensors' owners and the device's ready event.
// The allocators of a call's results: for each member, a Python callable
// (a CUDA result: memory of the framework's allocator) or None (a CPU
// result: the runtime's own memory, cpu_allocator, taken by the Python side
// after completion). The handle owns the callables and the memory.
struct allocation {
  std::vector<py_callable> owned;
  std::vector<result_ptr> results;
  std::vector<output_allocator> allocators;

  allocation() = default;
  allocation(const std::vector<py::object>& callables, const std::vector<int>& dtypes) {
    if (callables.size() != dtypes.size())
      throw py::value_error("allocator and dtype lists differ in length");
    for (size_t i = 0; i < callables.size(); ++i) {
      if (callables[i].is_none()) {
        results.push_back(std::make_shared<result_memory>());
        allocators.push_back(cpu_allocator(results.back(), static_cast<data_type>(dtypes[i])));
      } else {
        results.push_back(nullptr);
        owned.push_back(std::make_shared<py::object>(callables[i]));
        allocators.push_back(python_allocator(owned.back()));
      }
    }
  }
};

handle_ptr wrap(std::vector<handle> hs, py::object keep_alive, const py::object& device,
                allocation out = {}) {
  return std::make_unique<py_handle>(std::move(hs), py::make_tuple(std::move(keep_alive), device),
                                     std::move(out.owned), std::move(out.results));
}

handle_ptr wrap(handle h, py::object keep_alive, const py::object& device,
                allocation out = {}) {
  return wrap(std::vector<handle>{std::move(h)}, std::move(keep_alive), device, std::move(out));
}

} // namespace

void bind_collectives(py::module_& m) {
  m.def(
    "allreduce",
    [](uintptr_t input, uintptr_t output, int dtype, shape_t shape, const std::string& name,
       int op, double prescale, double postscale, py::object keep_alive,
       int32_t process_set_id, const py::object& device) {
      auto in = view(input, dtype, shape, device);
      auto out = view(output, dtype, std::move(shape), device);
      return wrap(troupe::allreduce(in, out, name, static_cast<reduce_op>(op), prescale,
                                    postscale, in_set(process_set_id)),
                  std::move(keep_alive), device);
    },
    py::arg("input"), py::arg("output"), py::arg("dtype"), py::arg("shape"), py::arg("name"),
    py::arg("op"), py::arg("prescale"), py::arg("postscale"), py::arg("keep_alive"),
    py::arg("process_set_id") = 0, py::arg("device") = py::none());
  m.def(
    "grouped_allreduce",
    [](const std::vector<uintptr_t>& inputs, const std::vector<uintptr_t>& outputs,
       const std::vector<int>& dtypes, const std::vector<shape_t>& shapes,
       const std::string& name, int op, double prescale, double postscale,
       py::object keep_alive, int32_t process_set_id, const py::object& device) {
      return wrap(troupe::grouped_allreduce(views(inputs, dtypes, shapes, device),
                                            views(outputs, dtypes, shapes, device), name,
                                            static_cast<reduce_op>(op), prescale, postscale,
                                            in_set(process_set_id)),
                  std::move(keep_alive), device);
    },
    py::arg("inputs"), py::arg("outputs"), py::arg("dtypes"), py::arg("shapes"),
    py::arg("name"), py::arg("op"), py::arg("prescale"), py::arg("postscale"),
    py::arg("keep_alive"), py::arg("process_set_id") = 0, py::arg("device") = py::none());
  m.def(
    "allgather",
    [](uintptr_t input, int dtype, shape_t shape, const std::string& name,
       py::object keep_alive, const py::object& allocate, int32_t process_set_id,
       const py::object& device) {
      allocation out({allocate}, {dtype});
      auto allocator = out.allocators.front();
      return wrap(troupe::allgather(view(input, dtype, std::move(shape), device), name,
                                    in_set(process_set_id), allocator),
                  std::move(keep_alive), device, std::move(out));
    },
    py::arg("input"), py::arg("dtype"), py::arg("shape"), py::arg("name"),
    py::arg("keep_alive"), py::arg("allocate"),
    py::arg("process_set_id") = 0, py::arg("device") = py::none());
  m.def(
    "grouped_allgather",
    [](const std::vector<uintptr_t>& inputs, const std::vector<int>& dtypes,
       const std::vector<shape_t>& shapes, const std::string& name, py::object keep_alive,
       const std::vector<py::object>& allocate, int32_t process_set_id,
       const py::object& device) {
      allocation out(allocate, dtypes);
      auto allocators = out.allocators;
      return wrap(troupe::grouped_allgather(views(inputs, dtypes, shapes, device), name,
                                            in_set(process_set_id), allocators),
                  std::move(keep_alive), device, std::move(out));
    },
    py::arg("inputs"), py::arg("dtypes"), py::arg("shapes"), py::arg("name"),
    py::arg("keep_alive"), py::arg("allocate"),
    py::arg("process_set_id") = 0, py::arg("device") = py::none());
  m.def(
    "broadcast",
    [](uintptr_t data, int dtype, shape_t shape, int root_rank, const std::string& name,
       py::object keep_alive, int32_t process_set_id, const py::object& device) {
      return wrap(troupe::broadcast(view(data, dtype, std::move(shape), device), root_rank, name,
                                    in_set(process_set_id)),
                  std::move(keep_alive), device);
    },
    py::arg("data"), py::arg("dtype"), py::arg("shape"), py::arg("root_rank"),
    py::arg("name"), py::arg("keep_alive"),
    py::arg("process_set_id") = 0, py::arg("device") = py::none());
  m.def(
    "alltoall",
    [](uintptr_t input, int dtype, shape_t shape, const std::string& name,
       const std::vector<int64_t>& splits, py::object keep_alive, const py::object& allocate,
       int32_t process_set_id, const py::object& device) {
      allocation out({allocate}, {dtype});
      auto allocator = out.allocators.front();
      return wrap(troupe::alltoall(view(input, dtype, std::move(shape), device), name, splits,
                                   in_set(process_set_id), allocator),
                  std::move(keep_alive), device, std::move(out));
    },
    py::arg("input"), py::arg("dtype"), py::arg("shape"), py::arg("name"), py::arg("splits"),
    py::arg("keep_alive"), py::arg("allocate"),
    py::arg("process_set_id") = 0, py::arg("device") = py::none());
  m.def(
    "reducescatter",
    [](uintptr_t input, int dtype, shape_t shape, const std::string& name, int op,
       double prescale, double postscale, py::object keep_alive, const py::object& allocate,
       int32_t process_set_id, const py::object& device) {
      allocation out({allocate}, {dtype});
      auto allocator = out.allocators.front();
      return wrap(troupe::reducescatter(view(input, dtype, std::move(shape), device), name,
                                        static_cast<reduce_op>(op), prescale, postscale,
                                        in_set(process_set_id), allocator),
                  std::move(keep_alive), device, std::move(out));
    },
    py::arg("input"), py::arg("dtype"), py::arg("shape"), py::arg("name"), py::arg("op"),
    py::arg("prescale"), py::arg("postscale"), py::arg("keep_alive"), py::arg("allocate"),
    py::arg("process_set_id") = 0, py::arg("device") = py::none());
  m.def(
    "grouped_reducescatter",
    [](const std::vector<uintptr_t>& inputs, const std::vector<int>& dtypes,
       const std::vector<shape_t>& shapes, const std::string& name, int op, double prescale,
       double postscale, py::object keep_alive, const std::vector<py::object>& allocate,
       int32_t process_set_id, const py::object& device) {
      allocation out(allocate, dtypes);
      auto allocators = out.allocators;
      return wrap(troupe::grouped_reducescatter(views(inputs, dtypes, shapes, device), name,
                                                static_cast<reduce_op>(op), prescale,
                                                postscale, in_set(process_set_id), allocators),
                  std::move(keep_alive), device, std::move(out));
    },
    py::arg("inputs"), py::arg("dtypes"), py::arg("shapes"), py::arg("name"), py::arg("op"),
    py::arg("prescale"), py::arg("postscale"), py::arg("keep_alive"), py::arg("allocate"),
    py::arg("process_set_id") = 0, py::arg("device") = py::none());
  m.def(
    "barrier",
    [](int32_t process_set_id) {
      return wrap(troupe::barrier(in_set(process_set_id)), py::none(), py::none());
    },
    py::arg("process_set_id") = 0);
  m.def(
    "join",
    [](int32_t process_set_id) {
      return wrap(troupe::join(in_set(process_set_id)), py::none(), py::none());
    },
    py::arg("process_set_id") = 0);
}

} // namespace troupe::python
