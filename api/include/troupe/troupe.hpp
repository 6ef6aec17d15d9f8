#pragma once

// The Troupe C++ API: a Horovod-style collective runtime. All collectives are
// asynchronous and return a handle; none blocks the caller.

#include <string>

#include "troupe/handle.hpp"
#include "troupe/status.hpp"
#include "troupe/types.hpp"

namespace troupe {

/// Starts the runtime of this process: reads its identity from the launcher's
/// environment (troupe-run), or runs as a single rank (size 1) without one.
/// Calling it when already initialized is harmless. Fails with a status
/// naming the step that did not complete before the start timeout.
status init();

/// Stops the runtime; pending collectives fail with status_code::shut_down.
/// init() may be called again afterwards.
void shutdown();

bool is_initialized();

/// Identity. Each returns -1 when the runtime is not initialized.
int rank();
int size();
int local_rank();
int local_size();
int cross_rank();
int cross_size();

/// Sums (or averages) `input` across ranks into `output`, which may be the
/// same memory. Both must have the same dtype and shape on every rank.
handle allreduce(const tensor& input, const tensor& output,
                 const std::string& name, reduce_op op = reduce_op::sum);

/// Concatenates every rank's `input` along the first dimension, in rank
/// order. The first dimension may differ per rank; the others must agree.
/// The result is in handle::output() / handle::output_shape().
handle allgather(const tensor& input, const std::string& name);

/// Copies `root_rank`'s tensor into `tensor` on every other rank.
handle broadcast(const tensor& tensor, int root_rank, const std::string& name);

} // namespace troupe
