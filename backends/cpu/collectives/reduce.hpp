#pragma once

#include "backends/cpu/collectives/collectives.hpp"

namespace troupe::backends {

/// Reduces `count` elements of `dtype` at `data` in place across the set:
/// prescale, reduce, average and postscale. 16-bit floats stay 16-bit (see
/// is_half) except under Adasum, widened to float32 for the whole
/// computation. Shared by allreduce and reducescatter.
void reduce_in_place(const run_context& ctx, const v1::Response& resp, void* data,
                     size_t count, data_type dtype);

/// This rank's part (`counts[rank]` elements into `output`, which may
/// overlap `input`) of the reduction of `input` (the parts of every rank
/// back to back, `counts` elements each): prescale, the communicator's
/// reduce-scatter, average and postscale. `input` is never written, unless
/// `own_input` (the caller's own copy, apart from `output`): then the
/// prescale goes to it where it is. Only where
/// communicator::reduces_scatter().
void reduce_scatter(const run_context& ctx, const v1::Response& resp, void* input,
                    bool own_input, void* output, std::vector<size_t> counts, data_type dtype);

/// The bytes of `dtype` a reduction of `resp` handles at a time, in whole
/// elements (0: at once). Every rank cuts the same chunks: the response
/// fixes the tensors, their order and their sizes. Adasum's dot products
/// and norms span the whole vector.
size_t fusion_chunk(const run_context& ctx, const v1::Response& resp, data_type dtype);

/// Whether reduce_pieces_in_place() can run `resp`: the communicator
/// reduces pieces where they lie (communicator::reduces_pieces) and the op
/// is not Adasum (whose dot products span the whole vector).
bool reduces_pieces(const run_context& ctx, const v1::Response& resp);

/// reduce_in_place() of the concatenation of `pieces` (whole elements of
/// `dtype` each), each into its `data`, read from its `input` where it has
/// one (never written): no fusion buffer, no copy of the inputs first.
/// Only where reduces_pieces().
void reduce_pieces_in_place(const run_context& ctx, const v1::Response& resp,
                            piece_span pieces, data_type dtype);

/// reduce_in_place() of `count` elements read from `input` into `output`
/// (the same, or apart): where the communicator reduces pieces, straight
/// from one to the other; else `input` copied into `output` first.
void reduce_into(const run_context& ctx, const v1::Response& resp, const void* input,
                 void* output, size_t count, data_type dtype);

} // namespace troupe::backends
