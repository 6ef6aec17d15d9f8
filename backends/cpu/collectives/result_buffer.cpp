#include <stdexcept>

#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {

char* result_buffer(actors::tensor_entry& e, const shape_t& shape) {
  // A valid pointer for a result of no bytes: nothing is ever written to it.
  static char no_bytes;
  auto& h = *e.handle;
  h.output_shape = shape;
  const auto bytes = static_cast<size_t>(num_elements(shape)) * element_size(e.input.dtype);
  char* memory = nullptr;
  if (e.allocate) {
    // The peers may be in the exchange already: without memory of the
    // caller's, this rank still takes its part (a rank that left it would
    // meet their pending exchange with its next one), and fails after.
    try {
      memory = static_cast<char*>(e.allocate(shape));
      if (memory == nullptr && bytes > 0)
        e.allocation_failure = "the output allocator of '" + e.request.tensor_name() +
                               "' returned no memory for shape " + to_string(shape);
    } catch (const std::exception& x) {
      e.allocation_failure = x.what();
    }
    if (e.allocation_failure.empty())
      return memory != nullptr ? memory : &no_bytes;
  }
  h.output.resize(bytes);
  return bytes > 0 ? h.output.data() : &no_bytes;
}

} // namespace troupe::backends
