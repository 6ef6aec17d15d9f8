// Collectives. A tensor arrives as (data pointer, dtype code, shape): the
// caller guarantees a contiguous CPU buffer and passes the objects owning it
// as `keep_alive`, which the returned handle holds until completion. A
// result sized by negotiation goes to memory from `allocate(shape)` (a
// Python callable returning a data pointer; one per member when grouped).
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

tensor view(uintptr_t data, int dtype, shape_t shape) {
  return {reinterpret_cast<void*>(data), static_cast<data_type>(dtype), std::move(shape)};
}

std::vector<tensor> views(const std::vector<uintptr_t>& data, const std::vector<int>& dtypes,
                          const std::vector<shape_t>& shapes) {
  if (data.size() != dtypes.size() || data.size() != shapes.size())
    throw py::value_error("pointer, dtype and shape lists differ in length");
  std::vector<tensor> out;
  out.reserve(data.size());
  for (size_t i = 0; i < data.size(); ++i)
    out.push_back(view(data[i], dtypes[i], shapes[i]));
  return out;
}

// The runtime knows each set's ranks: the id is all a collective needs.
process_set in_set(int32_t id) {
  return process_set{id, {}};
}

handle_ptr wrap(handle h, py::object keep_alive, std::vector<py_callable> allocators = {}) {
  return std::make_unique<py_handle>(std::vector<handle>{std::move(h)}, std::move(keep_alive),
                                     std::move(allocators));
}

handle_ptr wrap(std::vector<handle> hs, py::object keep_alive,
                std::vector<py_callable> allocators = {}) {
  return std::make_unique<py_handle>(std::move(hs), std::move(keep_alive),
                                     std::move(allocators));
}

// The Python callables (owned by the handle) and the allocators the runtime
// gets for them.
struct allocation {
  std::vector<py_callable> owned;
  std::vector<output_allocator> allocators;

  explicit allocation(const std::vector<py::object>& callables) {
    for (const auto& fn : callables) {
      owned.push_back(std::make_shared<py::object>(fn));
      allocators.push_back(python_allocator(owned.back()));
    }
  }
};

} // namespace

void bind_collectives(py::module_& m) {
  m.def(
    "allreduce",
    [](uintptr_t input, uintptr_t output, int dtype, shape_t shape, const std::string& name,
       int op, double prescale, double postscale, py::object keep_alive, int32_t process_set_id) {
      auto in = view(input, dtype, shape);
      auto out = view(output, dtype, std::move(shape));
      return wrap(troupe::allreduce(in, out, name, static_cast<reduce_op>(op), prescale,
                                    postscale, in_set(process_set_id)),
                  std::move(keep_alive));
    },
    py::arg("input"), py::arg("output"), py::arg("dtype"), py::arg("shape"), py::arg("name"),
    py::arg("op"), py::arg("prescale"), py::arg("postscale"), py::arg("keep_alive"), py::arg("process_set_id") = 0);
  m.def(
    "grouped_allreduce",
    [](const std::vector<uintptr_t>& inputs, const std::vector<uintptr_t>& outputs,
       const std::vector<int>& dtypes, const std::vector<shape_t>& shapes,
       const std::string& name, int op, double prescale, double postscale,
       py::object keep_alive, int32_t process_set_id) {
      return wrap(troupe::grouped_allreduce(views(inputs, dtypes, shapes),
                                            views(outputs, dtypes, shapes), name,
                                            static_cast<reduce_op>(op), prescale, postscale,
                                            in_set(process_set_id)),
                  std::move(keep_alive));
    },
    py::arg("inputs"), py::arg("outputs"), py::arg("dtypes"), py::arg("shapes"),
    py::arg("name"), py::arg("op"), py::arg("prescale"), py::arg("postscale"),
    py::arg("keep_alive"), py::arg("process_set_id") = 0);
  m.def(
    "allgather",
    [](uintptr_t input, int dtype, shape_t shape, const std::string& name,
       py::object keep_alive, const py::object& allocate, int32_t process_set_id) {
      allocation out({allocate});
      return wrap(troupe::allgather(view(input, dtype, std::move(shape)), name,
                                    in_set(process_set_id), out.allocators.front()),
                  std::move(keep_alive), std::move(out.owned));
    },
    py::arg("input"), py::arg("dtype"), py::arg("shape"), py::arg("name"),
    py::arg("keep_alive"), py::arg("allocate"), py::arg("process_set_id") = 0);
  m.def(
    "grouped_allgather",
    [](const std::vector<uintptr_t>& inputs, const std::vector<int>& dtypes,
       const std::vector<shape_t>& shapes, const std::string& name, py::object keep_alive,
       const std::vector<py::object>& allocate, int32_t process_set_id) {
      allocation out(allocate);
      return wrap(troupe::grouped_allgather(views(inputs, dtypes, shapes), name,
                                            in_set(process_set_id), out.allocators),
                  std::move(keep_alive), std::move(out.owned));
    },
    py::arg("inputs"), py::arg("dtypes"), py::arg("shapes"), py::arg("name"),
    py::arg("keep_alive"), py::arg("allocate"), py::arg("process_set_id") = 0);
  m.def(
    "broadcast",
    [](uintptr_t data, int dtype, shape_t shape, int root_rank, const std::string& name,
       py::object keep_alive, int32_t process_set_id) {
      return wrap(troupe::broadcast(view(data, dtype, std::move(shape)), root_rank, name,
                                    in_set(process_set_id)),
                  std::move(keep_alive));
    },
    py::arg("data"), py::arg("dtype"), py::arg("shape"), py::arg("root_rank"),
    py::arg("name"), py::arg("keep_alive"), py::arg("process_set_id") = 0);
  m.def(
    "alltoall",
    [](uintptr_t input, int dtype, shape_t shape, const std::string& name,
       const std::vector<int64_t>& splits, py::object keep_alive, const py::object& allocate,
       int32_t process_set_id) {
      allocation out({allocate});
      return wrap(troupe::alltoall(view(input, dtype, std::move(shape)), name, splits,
                                   in_set(process_set_id), out.allocators.front()),
                  std::move(keep_alive), std::move(out.owned));
    },
    py::arg("input"), py::arg("dtype"), py::arg("shape"), py::arg("name"), py::arg("splits"),
    py::arg("keep_alive"), py::arg("allocate"), py::arg("process_set_id") = 0);
  m.def(
    "reducescatter",
    [](uintptr_t input, int dtype, shape_t shape, const std::string& name, int op,
       double prescale, double postscale, py::object keep_alive, const py::object& allocate,
       int32_t process_set_id) {
      allocation out({allocate});
      return wrap(troupe::reducescatter(view(input, dtype, std::move(shape)), name,
                                        static_cast<reduce_op>(op), prescale, postscale,
                                        in_set(process_set_id), out.allocators.front()),
                  std::move(keep_alive), std::move(out.owned));
    },
    py::arg("input"), py::arg("dtype"), py::arg("shape"), py::arg("name"), py::arg("op"),
    py::arg("prescale"), py::arg("postscale"), py::arg("keep_alive"), py::arg("allocate"),
    py::arg("process_set_id") = 0);
  m.def(
    "grouped_reducescatter",
    [](const std::vector<uintptr_t>& inputs, const std::vector<int>& dtypes,
       const std::vector<shape_t>& shapes, const std::string& name, int op, double prescale,
       double postscale, py::object keep_alive, const std::vector<py::object>& allocate,
       int32_t process_set_id) {
      allocation out(allocate);
      return wrap(troupe::grouped_reducescatter(views(inputs, dtypes, shapes), name,
                                                static_cast<reduce_op>(op), prescale,
                                                postscale, in_set(process_set_id),
                                                out.allocators),
                  std::move(keep_alive), std::move(out.owned));
    },
    py::arg("inputs"), py::arg("dtypes"), py::arg("shapes"), py::arg("name"), py::arg("op"),
    py::arg("prescale"), py::arg("postscale"), py::arg("keep_alive"), py::arg("allocate"),
    py::arg("process_set_id") = 0);
  m.def(
    "barrier",
    [](int32_t process_set_id) {
      return wrap(troupe::barrier(in_set(process_set_id)), py::none());
    },
    py::arg("process_set_id") = 0);
  m.def(
    "join",
    [](int32_t process_set_id) {
      return wrap(troupe::join(in_set(process_set_id)), py::none());
    },
    py::arg("process_set_id") = 0);
}

} // namespace troupe::python
