#pragma once

// The pieces of the troupe._core extension module, one per file.

#include <pybind11/pybind11.h>

namespace troupe::python {

void bind_runtime(pybind11::module_& m);
void bind_handle(pybind11::module_& m);
void bind_collectives(pybind11::module_& m);

} // namespace troupe::python
