#include "backends/cpu/cpu_backend.hpp"

#include <string>

#include <spdlog/spdlog.h>

#include "backends/cpu/execute.hpp"

namespace troupe::backends {

cpu_backend::cpu_backend(std::unique_ptr<communicator> comm, int set_rank, int set_size,
                         std::optional<size_t> fusion_chunk_bytes)
  : comm_(std::move(comm)), rank_(set_rank), size_(set_size),
    fusion_chunk_bytes_(fusion_chunk_bytes) {
}

void cpu_backend::connect() {
  comm_->connect();
  if (!fusion_chunk_bytes_)
    fusion_chunk_bytes_ = comm_->chunk_bytes();
  if (size_ > 1)
    spdlog::info("troupe set rank {}/{}: CPU allreduces over {} reduced {} at a time", rank_,
                 size_, comm_->name(),
                 *fusion_chunk_bytes_ ? std::to_string(*fusion_chunk_bytes_) + " bytes"
                                      : std::string("whole"));
}

std::unique_ptr<completion> cpu_backend::start(actors::collective_work& work) {
  const size_t chunk = work.fusion_chunk_bytes ? *work.fusion_chunk_bytes
                                               : fusion_chunk_bytes_.value_or(0);
  if (work.response.op() == v1::OP_TYPE_ALLREDUCE ||
      work.response.op() == v1::OP_TYPE_REDUCESCATTER)
    work.fusion_chunk_bytes = chunk;  // reported in the list's stats
  return std::make_unique<finished>(
    execute({*comm_, rank_, size_, scratch_, work.trace, chunk}, work));
}

} // namespace troupe::backends
