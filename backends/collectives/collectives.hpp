#pragma once

// One function per collective: each takes a negotiated response and one
// local entry, and drives the backend's primitives (copy-in, widening of
// 16-bit floats, scaling, output sizing). They throw backend_error.

#include "actors/tensor_entry.hpp"
#include "backends/backend.hpp"

namespace troupe::backends {

/// The local rank's place in the process set the backend serves.
struct run_context {
  backend& b;
  int rank;
  int size;
};

void run_allreduce(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e);
void run_reducescatter(const run_context& ctx, const v1::Response& resp,
                       actors::tensor_entry& e);
void run_allgather(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e);
void run_broadcast(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e);
void run_alltoall(const run_context& ctx, actors::tensor_entry& e);

/// Rows of a `rows`-row tensor that reducescatter leaves on each rank:
/// Horovod's rule, the first rows % size ranks get one extra.
std::vector<int64_t> reducescatter_rows(int64_t rows, int size);

} // namespace troupe::backends
