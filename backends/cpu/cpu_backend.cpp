#include "backends/cpu/cpu_backend.hpp"

#include "backends/cpu/execute.hpp"

namespace troupe::backends {

cpu_backend::cpu_backend(std::unique_ptr<communicator> comm, int set_rank, int set_size,
                         size_t fusion_chunk_bytes)
  : comm_(std::move(comm)), rank_(set_rank), size_(set_size),
    fusion_chunk_bytes_(fusion_chunk_bytes) {
}

std::unique_ptr<completion> cpu_backend::start(actors::collective_work& work) {
  return std::make_unique<finished>(execute({*comm_, rank_, size_, scratch_, work.trace, fusion_chunk_bytes_}, work));
}

} // namespace troupe::backends
