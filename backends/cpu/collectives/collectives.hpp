#pragma once

// One function per collective: each takes a negotiated response and one
// local entry, and drives the communicator's primitives (copy-in, widening of
// 16-bit floats, scaling, output sizing). They throw backend_error.

#include <functional>
#include <string>
#include <vector>

#include "actors/tensor_entry.hpp"
#include "backends/communicator.hpp"

namespace troupe::backends {

/// Working memory owned by the backend actor and reused by every
/// collective: it only grows, so steady-state steps allocate nothing (a
/// fresh buffer per call costs Open MPI half its large-message bandwidth).
struct scratch_buffers {
  std::vector<char> copy;   // reducescatter's full-size reduction, or its prescaled input
  std::vector<char> fusion; // fused allreduces / allgathers, back to back
  std::vector<float> wide;  // float16 / bfloat16 widened to float32

  /// `buffer` with room for `n` elements, grown (never shrunk) as needed.
  template <class T>
  static T* at_least(std::vector<T>& buffer, size_t n) {
    if (buffer.size() < n)
      buffer.resize(n);
    return buffer.data();
  }
};

using entry_iterator = std::vector<actors::tensor_entry_ptr>::const_iterator;

/// Copies the inputs of entries [first, last) back to back into `buffer`
/// (the fusion buffer).
void pack_inputs(entry_iterator first, entry_iterator last, char* buffer);

/// How a fused work's tensors run, given the bytes a collective handles at
/// a time (`chunk`, run_context::fusion_chunk_bytes): one of at least 1/32
/// of a chunk alone, where it lies (`alone`), as it comes; the smaller ones
/// in list order, whatever lies between them, in batches of consecutive
/// ones of at most `chunk` bytes (`batch(first, last, bytes)`, through the
/// fusion buffer; `bytes` may be 0), at the end. Without a chunk, all of
/// them in one batch.
void run_in_batches(const std::vector<actors::tensor_entry_ptr>& entries, size_t chunk,
                    const std::function<void(actors::tensor_entry&)>& alone,
                    const std::function<void(entry_iterator, entry_iterator, size_t)>& batch);

/// Where the result of `e` goes once negotiation has sized it to `shape`
/// (the input's dtype): memory from the caller's output_allocator, else the
/// handle's output bytes. Records the shape on the handle. Never null, so
/// an empty result can be handed to a backend too: where the allocator
/// gives no memory, the handle's bytes stand in and
/// `e.allocation_failure` says why (the collective fails after it ran).
char* result_buffer(actors::tensor_entry& e, const shape_t& shape);

/// What a collective runs with: the communicator, the local rank's place
/// in the process set, the backend's scratch memory.
struct run_context {
  communicator& comm;
  int rank;
  int size;
  scratch_buffers& scratch;
  const actors::activity_trace& trace;  // may be empty
  /// Bytes an allreduce, fused or not, reduces at a time (0 = all at
  /// once), so the copies in and out and the reduction stay in cache (and
  /// Open MPI's large-message path, slower here, is not taken).
  size_t fusion_chunk_bytes = 0;

  /// Begin ('B') / end ('E') of an activity on the timeline, if one is written.
  void span(const std::string& activity, char phase) const {
    if (trace)
      trace(activity, phase);
  }
};

/// One allreduce, reduced a chunk at a time in its output (after copying
/// the input there when they differ); Adasum at once.
void run_allreduce(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e);
/// Several allreduces fused by the coordinator, reduced a chunk at a time
/// (run_context::fusion_chunk_bytes): a tensor of at least 1/32 of a chunk
/// reduced in place in its output, the smaller ones packed in list order
/// into the persistent fusion buffer, a chunk at a time, and unpacked.
/// Without a chunk, or with Adasum, everything goes through the buffer as
/// one vector.
void run_fused_allreduce(const run_context& ctx, const v1::Response& resp,
                         const std::vector<actors::tensor_entry_ptr>& entries);
/// Several allgathers of one dtype fused by the coordinator: each rank's
/// tensors packed into one block, one allgather, every tensor's rows copied
/// out of every rank's block.
void run_fused_allgather(const run_context& ctx, const v1::Response& resp,
                         const std::vector<actors::tensor_entry_ptr>& entries);
void run_reducescatter(const run_context& ctx, const v1::Response& resp,
                       actors::tensor_entry& e);
/// Several reducescatters fused by the coordinator (or a group), in batches
/// as run_in_batches cuts them: a batch's tensors packed rank part by rank
/// part (every tensor's rows for rank 0, then for rank 1, ...), one
/// reduce-scatter, this rank's rows of each tensor copied out.
void run_fused_reducescatter(const run_context& ctx, const v1::Response& resp,
                             const std::vector<actors::tensor_entry_ptr>& entries);
void run_allgather(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e);
void run_broadcast(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e);
void run_alltoall(const run_context& ctx, actors::tensor_entry& e);

/// The timeline name of running `op` on this backend: GLOO_ALLREDUCE,
/// MPI_BROADCAST, ... (Horovod's activity names).
std::string backend_activity(const run_context& ctx, v1::OpType op);

/// Rows of a `rows`-row tensor that reducescatter leaves on each rank:
/// Horovod's rule, the first rows % size ranks get one extra.
std::vector<int64_t> reducescatter_rows(int64_t rows, int size);

} // namespace troupe::backends
