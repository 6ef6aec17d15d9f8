#include "backends/local/local_communicator.hpp"

#include <cstring>
#include <string>

namespace troupe::backends {

void local_communicator::allgather(const allgather_options& opts) {
  if (opts.output != opts.input)
    std::memcpy(opts.output, opts.input, opts.counts.at(0) * element_size(opts.dtype));
}

void local_communicator::alltoall(const alltoall_options& opts) {
  if (opts.output != opts.input)
    std::memcpy(opts.output, opts.input, static_cast<size_t>(opts.send_bytes.at(0)));
}

void local_communicator::sendrecv(const void*, size_t, void*, size_t, int peer) {
  throw backend_error("a set of one rank has no peer " + std::to_string(peer));
}

} // namespace troupe::backends
