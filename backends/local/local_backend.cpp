#include "backends/local/local_backend.hpp"

#include <cstring>

namespace troupe::backends {

void local_backend::allgather(const allgather_options& opts) {
  if (opts.output != opts.input)
    std::memcpy(opts.output, opts.input, opts.counts.at(0) * element_size(opts.dtype));
}

void local_backend::alltoall(const alltoall_options& opts) {
  if (opts.output != opts.input)
    std::memcpy(opts.output, opts.input, static_cast<size_t>(opts.send_bytes.at(0)));
}

} // namespace troupe::backends
