#pragma once

// What one rank can check about a collective before anything is sent, and
// the request it becomes. Kept apart from the facade so grouped and single
// collectives share one validation path.

#include <string>
#include <vector>

#include "actors/tensor_entry.hpp"
#include "troupe/status.hpp"
#include "troupe/types.hpp"

namespace troupe::api {

/// A collective that passed the local checks, built as the entry the
/// negotiator takes (the request the coordinator sees, this rank's memory,
/// the handle's state; process_set_id is the caller's to set), or the error
/// it failed with (entry null). Built once, in place: each copy or move of
/// a request costs a protobuf construction, and a training step submits
/// hundreds.
struct prepared {
  actors::tensor_entry_ptr entry;
  status error;
};

prepared prepare_allreduce(const tensor& input, const tensor& output, const std::string& name,
                           reduce_op op, double prescale, double postscale, int set_size);
prepared prepare_reducescatter(const tensor& input, const std::string& name, reduce_op op,
                               double prescale, double postscale,
                               const output_allocator& allocate);
prepared prepare_allgather(const tensor& input, const std::string& name,
                           const output_allocator& allocate);
prepared prepare_alltoall(const tensor& input, const std::string& name,
                          const std::vector<int64_t>& splits, int set_size,
                          const output_allocator& allocate);
prepared prepare_broadcast(const tensor& t, int root_rank, const std::string& name,
                           int set_size);
prepared prepare_barrier();
prepared prepare_join();

} // namespace troupe::api
