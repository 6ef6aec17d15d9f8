// troupe._core: the C++ API as seen from Python. Frameworks hand tensors over
// as (data pointer, dtype code, shape), so the module needs no framework
// headers; troupe.torch turns torch tensors into those triples.
#include "api/python/src/bindings.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() = "Troupe runtime core (framework independent)";
  troupe::python::bind_runtime(m);
  troupe::python::bind_handle(m);
  troupe::python::bind_collectives(m);
}
