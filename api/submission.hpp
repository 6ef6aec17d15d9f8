#pragma once

// What one rank can check about a collective before anything is sent, and
// the request it becomes. Kept apart from the facade so grouped and single
// collectives share one validation path.

#include <optional>
#include <string>
#include <vector>

#include "troupe/status.hpp"
#include "troupe/types.hpp"
#include "troupe/v1/control.pb.h"

namespace troupe::api {

struct submission {
  v1::Request request;  // what the coordinator sees
  tensor input;
  tensor output;
  std::vector<int64_t> splits;
  output_allocator allocate;  // empty: the result goes to the handle
};

/// A submission that passed the local checks, or the error it failed with.
struct prepared {
  std::optional<submission> sub;
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
