#include "backends/nccl/nccl_collectives.hpp"

#include <algorithm>
#include <numeric>
#include <thread>

#include "backends/cpu/collectives/collectives.hpp"
#include "backends/cuda/kernels.hpp"

namespace troupe::backends {

namespace {

ncclDataType_t reduction_type(data_type dtype) {
  switch (dtype) {
    case data_type::uint8:
    case data_type::boolean: return ncclUint8;
    case data_type::int8: return ncclInt8;
    case data_type::int32: return ncclInt32;
    case data_type::int64: return ncclInt64;
    case data_type::float16: return ncclFloat16;
    case data_type::bfloat16: return ncclBfloat16;
    case data_type::float32: return ncclFloat32;
    case data_type::float64: return ncclFloat64;
    case data_type::uint16:
    case data_type::int16: break;
  }
  throw backend_error(std::string("NCCL cannot reduce ") + to_string(dtype) +
                      " tensors; TROUPE_GPU_OPERATIONS=gloo reduces them on the CPU");
}

ncclRedOp_t reduction_op(reduce_op op) {
  switch (op) {
    case reduce_op::sum:
    case reduce_op::average: return ncclSum;  // divided afterwards, as on the CPU
    case reduce_op::min: return ncclMin;
    case reduce_op::max: return ncclMax;
    case reduce_op::product: return ncclProd;
    case reduce_op::adasum: break;
  }
  throw backend_error(std::string("the NCCL backend has no ") + to_string(op) +
                      " reduction; TROUPE_GPU_OPERATIONS=gloo runs it on the CPU");
}

int divisor(const v1::Response& resp, int size) {
  return resp.reduce_op() == v1::REDUCE_OP_AVERAGE ? size : 1;
}

// Runs the calls `add(comm, keep)` makes as one NCCL group; `keep` records
// each call's result, and the first failure is reported after the group
// has been closed.
template <class F>
void group(const nccl_run_context& ctx, const char* what, F&& add) {
  ctx.comm.run(what, [&](ncclComm_t comm) {
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess)
      return first;
    add(comm, [&](ncclResult_t r) {
      if (first == ncclSuccess)
        first = r;
    });
    const auto end = ncclGroupEnd();
    return first == ncclSuccess ? end : first;
  });
}

void copy_async(void* to, const void* from, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  if (bytes > 0)
    cuda::check(cudaMemcpyAsync(to, from, bytes, kind, s), "cudaMemcpyAsync");
}

// The caller's device memory for a result sized by negotiation.
char* device_result(actors::tensor_entry& e, const shape_t& shape) {
  if (!e.allocate)
    throw backend_error("the result of CUDA tensor '" + e.request.tensor_name() +
                        "' needs an output_allocator");
  auto* memory = result_buffer(e, shape);
  // result_buffer's stand-in is host memory, which NCCL cannot write: this
  // rank cannot take its part, and the set breaks as for any NCCL failure.
  if (!e.allocation_failure.empty())
    throw backend_error(e.allocation_failure);
  return memory;
}

size_t row_bytes(const tensor& t) {
  return static_cast<size_t>(num_elements(shape_t(t.shape.begin() + 1, t.shape.end()))) *
         element_size(t.dtype);
}

// Fused tensors start 16 bytes apart (every element size divides 16), so
// the batched copy moves 16-byte words.
size_t aligned(size_t bytes) {
  return (bytes + 15) / 16 * 16;
}

// Waits on the host until the work queued on ctx.stream has run, for a
// result the host needs: bounded by ctx.timeout, and cut short by the
// communicator's error or abort.
void wait_for_stream(const nccl_run_context& ctx, const std::string& what) {
  cuda::event done;
  done.record(ctx.stream);
  const auto deadline = std::chrono::steady_clock::now() + ctx.timeout;
  auto delay = std::chrono::microseconds(10);
  while (!done.done()) {
    if (auto why = ctx.comm.async_error(); !why.empty())
      throw backend_error("nccl " + what + ": " + why);
    if (std::chrono::steady_clock::now() > deadline) {
      ctx.comm.abort();
      throw backend_error("nccl " + what + " did not finish within " +
                          std::to_string(ctx.timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::microseconds(1000));
  }
}

// The batched copy `copies`, between the events of `span` when a timeline
// is written.
void timed_copy(const std::vector<cuda::copy_span>& copies, cudaStream_t stream,
                timed_span* span) {
  if (span != nullptr)
    span->begin.record(stream);
  cuda::batched_copy(copies, stream);
  if (span != nullptr) {
    span->end.record(stream);
    span->recorded = true;
  }
}

void copy_into_fusion_buffer(const nccl_run_context& ctx,
                             const std::vector<cuda::copy_span>& copies) {
  timed_copy(copies, ctx.stream, ctx.copy_timing ? &ctx.copy_timing->in : nullptr);
}

void copy_out_of_fusion_buffer(const nccl_run_context& ctx,
                               const std::vector<cuda::copy_span>& copies) {
  timed_copy(copies, ctx.stream, ctx.copy_timing ? &ctx.copy_timing->out : nullptr);
}

// `count` elements from `in` reduced into `out` in two levels: this rank's
// share reduce-scattered on the host, allreduced across hosts, gathered on
// the host; the tail that does not divide evenly over the flat
// communicator. NCCL's in-place forms: a reduce-scatter into
// out + member * share, an allgather from there.
void hierarchical_allreduce(const nccl_run_context& ctx, const void* in, void* out,
                            size_t count, data_type dtype, ncclDataType_t type,
                            ncclRedOp_t op) {
  const auto& h = *ctx.hierarchy;
  const auto esize = element_size(dtype);
  const auto split = split_for_hierarchy(count, esize, h.layout.members);
  const auto share = split.per_member;
  const auto* from = static_cast<const char*>(in);
  auto* to = static_cast<char*>(out);
  char* mine = to + static_cast<size_t>(h.layout.member) * share * esize;
  if (share > 0) {
    h.local.run("ncclReduceScatter (hierarchical allreduce, on the host)", [&](ncclComm_t c) {
      return ncclReduceScatter(from, mine, share, type, op, c, ctx.stream);
    });
    h.cross.run("ncclAllReduce (hierarchical allreduce, across hosts)", [&](ncclComm_t c) {
      return ncclAllReduce(mine, mine, share, type, op, c, ctx.stream);
    });
    h.local.run("ncclAllGather (hierarchical allreduce, on the host)", [&](ncclComm_t c) {
      return ncclAllGather(mine, to, share, type, c, ctx.stream);
    });
  }
  if (split.tail > 0) {
    const auto at = share * static_cast<size_t>(h.layout.members) * esize;
    ctx.comm.run("ncclAllReduce (hierarchical allreduce's tail)", [&](ncclComm_t c) {
      return ncclAllReduce(from + at, to + at, split.tail, type, op, c, ctx.stream);
    });
  }
}

void allreduce_in_place(const nccl_run_context& ctx, const v1::Response& resp, void* in,
                        void* out, size_t count, data_type dtype) {
  const auto type = reduction_type(dtype);
  const auto op = reduction_op(static_cast<reduce_op>(resp.reduce_op()));
  if (resp.prescale_factor() != 1.0) {
    if (out != in)
      copy_async(out, in, count * element_size(dtype), cudaMemcpyDeviceToDevice, ctx.stream);
    cuda::scale(out, count, dtype, 1, resp.prescale_factor(), ctx.stream);
    in = out;
  }
  if (ctx.hierarchy != nullptr && ctx.hierarchy->allreduce) {
    hierarchical_allreduce(ctx, in, out, count, dtype, type, op);
  } else {
    ctx.comm.run("ncclAllReduce", [&](ncclComm_t comm) {
      return ncclAllReduce(in, out, count, type, op, comm, ctx.stream);
    });
  }
  cuda::scale(out, count, dtype, divisor(resp, ctx.size), resp.postscale_factor(), ctx.stream);
}

// One tensor of `block` bytes per rank gathered in two levels: across hosts
// into this rank's part of the fusion buffer (member m's part holds every
// host's block of member m), then on the host (in place), then one batched
// copy puts each block at its rank's place in `out`.
void hierarchical_allgather(const nccl_run_context& ctx, const void* in, char* out,
                            size_t block) {
  const auto& h = *ctx.hierarchy;
  const auto per_member = block * static_cast<size_t>(h.layout.hosts);
  char* scratch = ctx.fusion.at_least(per_member * static_cast<size_t>(h.layout.members));
  char* mine = scratch + static_cast<size_t>(h.layout.member) * per_member;
  h.cross.run("ncclAllGather (hierarchical allgather, across hosts)", [&](ncclComm_t c) {
    return ncclAllGather(in, mine, block, ncclUint8, c, ctx.stream);
  });
  h.local.run("ncclAllGather (hierarchical allgather, on the host)", [&](ncclComm_t c) {
    return ncclAllGather(mine, scratch, per_member, ncclUint8, c, ctx.stream);
  });
  std::vector<cuda::copy_span> copies;
  for (const auto& move : allgather_placement(h.layout, block))
    copies.push_back({scratch + move.from, out + move.to, block});
  copy_out_of_fusion_buffer(ctx, copies);
}

} // namespace

void nccl_allreduce(const nccl_run_context& ctx, const v1::Response& resp,
                    const std::vector<actors::tensor_entry_ptr>& entries) {
  const auto dtype = static_cast<data_type>(resp.dtype());
  const auto esize = element_size(dtype);
  const auto on_gpu = [](const actors::tensor_entry& e) {
    return e.input.device.kind == device_kind::cuda;
  };
  if (entries.size() == 1 && on_gpu(*entries.front())) {
    auto& e = *entries.front();
    allreduce_in_place(ctx, resp, e.input.data, e.output.data,
                       static_cast<size_t>(num_elements(e.input.shape)), dtype);
    return;
  }
  // Fused (or a joined rank's zeros): one reduction of the fusion buffer.
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const auto& e : entries) {
    offsets.push_back(total);
    total += aligned(e->input.size_bytes());
  }
  char* buffer = ctx.fusion.at_least(total);
  std::vector<cuda::copy_span> in, out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = *entries[i];
    if (on_gpu(e)) {
      in.push_back({e.input.data, buffer + offsets[i], e.input.size_bytes()});
      out.push_back({buffer + offsets[i], e.output.data, e.input.size_bytes()});
    } else if (e.input.size_bytes() > 0) {
      cuda::check(cudaMemsetAsync(buffer + offsets[i], 0, e.input.size_bytes(), ctx.stream),
                  "cudaMemsetAsync (a joined rank's zeros)");
    }
  }
  copy_into_fusion_buffer(ctx, in);
  allreduce_in_place(ctx, resp, buffer, buffer, total / esize, dtype);
  copy_out_of_fusion_buffer(ctx, out);
}

void nccl_allgather(const nccl_run_context& ctx, const v1::Response& resp,
                    const std::vector<actors::tensor_entry_ptr>& entries) {
  const auto ranks = static_cast<size_t>(ctx.size);
  // rows(t, r): first dimension of tensor t on rank r.
  const auto rows = [&](size_t t, size_t r) {
    return resp.tensor_sizes(static_cast<int>(t * ranks + r));
  };
  std::vector<char*> outputs;
  for (size_t t = 0; t < entries.size(); ++t) {
    auto& e = *entries[t];
    auto shape = e.input.shape;
    shape[0] = 0;
    for (size_t r = 0; r < ranks; ++r)
      shape[0] += rows(t, r);
    outputs.push_back(device_result(e, shape));
  }
  const auto& first = *entries.front();
  const auto even = std::all_of(resp.tensor_sizes().begin(), resp.tensor_sizes().end(),
                                [&](int64_t n) { return n == resp.tensor_sizes(0); });
  if (entries.size() == 1 && even && ctx.hierarchy != nullptr && ctx.hierarchy->allgather) {
    hierarchical_allgather(ctx, first.input.data, outputs.front(), first.input.size_bytes());
    return;
  }
  if (entries.size() == 1 && even) {
    ctx.comm.run("ncclAllGather", [&](ncclComm_t comm) {
      return ncclAllGather(first.input.data, outputs.front(), first.input.size_bytes(),
                           ncclUint8, comm, ctx.stream);
    });
    return;
  }
  // Uneven first dimensions or several tensors: every rank broadcasts its
  // rows of each tensor, all in one group.
  group(ctx, "ncclBroadcast (allgather)", [&](ncclComm_t comm, auto keep) {
    for (size_t t = 0; t < entries.size(); ++t) {
      const auto row = row_bytes(entries[t]->input);
      size_t at = 0;
      for (size_t r = 0; r < ranks; ++r) {
        const auto bytes = static_cast<size_t>(rows(t, r)) * row;
        if (bytes > 0)
          keep(ncclBroadcast(entries[t]->input.data, outputs[t] + at, bytes, ncclUint8,
                             static_cast<int>(r), comm, ctx.stream));
        at += bytes;
      }
    }
  });
}

void nccl_broadcast(const nccl_run_context& ctx, const v1::Response& resp,
                    actors::tensor_entry& e) {
  ctx.comm.run("ncclBroadcast", [&](ncclComm_t comm) {
    return ncclBroadcast(e.input.data, e.input.data, e.input.size_bytes(), ncclUint8,
                         resp.root_rank(), comm, ctx.stream);
  });
}

void nccl_alltoall(const nccl_run_context& ctx, actors::tensor_entry& e) {
  const auto n = static_cast<size_t>(ctx.size);
  const auto row = row_bytes(e.input);
  auto send_rows = e.splits;
  if (send_rows.empty())
    send_rows.assign(n, e.input.shape[0] / ctx.size);
  // Row counts: this rank's on the host and the device, then every peer's.
  const size_t count_bytes = n * sizeof(int64_t);
  auto* host = reinterpret_cast<int64_t*>(ctx.host.at_least(2 * count_bytes));
  char* counts = ctx.fusion.at_least(2 * count_bytes);
  std::copy(send_rows.begin(), send_rows.end(), host);
  copy_async(counts, host, count_bytes, cudaMemcpyHostToDevice, ctx.stream);
  group(ctx, "ncclSend/ncclRecv (alltoall row counts)", [&](ncclComm_t comm, auto keep) {
    for (size_t r = 0; r < n; ++r) {
      const int peer = static_cast<int>(r);
      keep(ncclSend(counts + r * sizeof(int64_t), sizeof(int64_t), ncclUint8, peer, comm,
                    ctx.stream));
      keep(ncclRecv(counts + count_bytes + r * sizeof(int64_t), sizeof(int64_t), ncclUint8,
                    peer, comm, ctx.stream));
    }
  });
  copy_async(host + n, counts + count_bytes, count_bytes, cudaMemcpyDeviceToHost, ctx.stream);
  wait_for_stream(ctx, "alltoall of '" + e.request.tensor_name() + "' (row counts)");
  std::vector<int64_t> recv_rows(host + n, host + 2 * n);

  auto shape = e.input.shape;
  shape[0] = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
  char* out = device_result(e, shape);
  const auto* in = static_cast<const char*>(e.input.data);
  group(ctx, "ncclSend/ncclRecv (alltoall)", [&](ncclComm_t comm, auto keep) {
    size_t sent = 0, received = 0;
    for (size_t r = 0; r < n; ++r) {
      const int peer = static_cast<int>(r);
      const auto send = static_cast<size_t>(send_rows[r]) * row;
      const auto recv = static_cast<size_t>(recv_rows[r]) * row;
      if (send > 0)
        keep(ncclSend(in + sent, send, ncclUint8, peer, comm, ctx.stream));
      if (recv > 0)
        keep(ncclRecv(out + received, recv, ncclUint8, peer, comm, ctx.stream));
      sent += send;
      received += recv;
    }
  });
  e.handle->received_splits = std::move(recv_rows);
}

void nccl_reducescatter(const nccl_run_context& ctx, const v1::Response& resp,
                        actors::tensor_entry& e) {
  const auto dtype = e.input.dtype;
  const auto type = reduction_type(dtype);
  const auto op = reduction_op(static_cast<reduce_op>(resp.reduce_op()));
  const auto esize = element_size(dtype);
  const auto row_elements = row_bytes(e.input) / esize;
  const auto per_rank = reducescatter_rows(e.input.shape[0], ctx.size);
  const auto rank = static_cast<size_t>(ctx.rank);
  auto shape = e.input.shape;
  shape[0] = per_rank[rank];
  char* out = device_result(e, shape);
  const auto mine = static_cast<size_t>(per_rank[rank]) * row_elements;
  const auto total = static_cast<size_t>(num_elements(e.input.shape));
  const bool even = std::all_of(per_rank.begin(), per_rank.end(),
                                [&](int64_t n) { return n == per_rank.front(); });
  const void* in = e.input.data;
  char* scratch = nullptr;
  if (resp.prescale_factor() != 1.0 || !even) {
    scratch = ctx.fusion.at_least(total * esize);
    copy_async(scratch, in, total * esize, cudaMemcpyDeviceToDevice, ctx.stream);
    cuda::scale(scratch, total, dtype, 1, resp.prescale_factor(), ctx.stream);
    in = scratch;
  }
  if (even) {
    ctx.comm.run("ncclReduceScatter", [&](ncclComm_t comm) {
      return ncclReduceScatter(in, out, mine, type, op, comm, ctx.stream);
    });
  } else {
    // Horovod's uneven split: reduce everything, keep this rank's rows.
    ctx.comm.run("ncclAllReduce (reducescatter)", [&](ncclComm_t comm) {
      return ncclAllReduce(scratch, scratch, total, type, op, comm, ctx.stream);
    });
    const auto before = std::accumulate(per_rank.begin(), per_rank.begin() + ctx.rank, int64_t{0});
    copy_async(out, scratch + static_cast<size_t>(before) * row_elements * esize, mine * esize,
               cudaMemcpyDeviceToDevice, ctx.stream);
  }
  cuda::scale(out, mine, dtype, divisor(resp, ctx.size), resp.postscale_factor(), ctx.stream);
}

} // namespace troupe::backends
