#include "backends/shm/shm_communicator.hpp"

#include <numeric>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "backends/cpu/arith.hpp"
#include "backends/host_layout.hpp"
#include "backends/set_hosts.hpp"
#include "backends/shm/shm_group.hpp"
#include "backends/registry.hpp"
#include "elastic/store.hpp"

namespace troupe::backends {

shm_communicator::shm_communicator(backend_context ctx)
    : gloo_communicator(ctx), ctx_(std::move(ctx)) {
}

shm_communicator::~shm_communicator() {
  if (!group_)
    return;
  spdlog::info("troupe set rank {}/{}: shared-memory allreduce: {} allreduces, {} bytes through "
               "segment {}, {} bytes of this rank's shares across hosts",
               ctx_.rank, ctx_.size, allreduces_, bytes_, segment_name_, cross_bytes_);
  if (one_host_)
    spdlog::info("troupe set rank {}/{}: shared-memory broadcasts, allgathers, alltoalls, "
                 "reduce-scatters and barriers: {} calls, {} bytes through segment {} ({} "
                 "alltoall calls)",
                 ctx_.rank, ctx_.size, others_, other_bytes_, segment_name_, alltoalls_);
}

void shm_communicator::connect() {
  // Each step below may wait up to the timeout for peers, and an abort
  // reaches none that is still being set up: one that came meanwhile ends
  // the setup before the next.
  const auto unless_aborted = [this](const char* next) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_)
      throw backend_error(std::string("shared-memory setup was aborted before ") + next +
                          ": a peer of the process set was lost");
  };
  gloo_communicator::connect();
  unless_aborted("the hosts' exchange");
  auto& store = *ctx_.store;
  const auto layout = layout_of(exchange_hosts(ctx_, "shm/"), ctx_.rank);
  unless_aborted("the segment");
  if (layout.members < 2 || !layout.uniform) {
    spdlog::info("troupe set rank {}/{}: shared-memory allreduce off, Gloo for everything: {}",
                 ctx_.rank, ctx_.size,
                 layout.uniform ? "one rank per host"
                                : "hosts of the set have different numbers of ranks");
    return;
  }

  const auto name_key = ctx_.store_prefix + "shm/segment/" + std::to_string(layout.host);
  auto segment = [&] {
    if (layout.member > 0)
      return shm_group::open_host_segment(store.wait_get(name_key, ctx_.timeout), layout.members);
    auto created = shm_group::create_host_segment(layout.members);
    store.set(name_key, created.name());
    return created;
  }();
  segment_name_ = segment.name();
  auto group = std::make_unique<shm_group>(
    std::move(segment), layout.member, layout.members, ctx_.timeout,
    ranks_have_cores(layout.members, ctx_.own_core) ? shm_group::spin_times::polling()
                                                    : shm_group::spin_times{});
  std::unique_ptr<gloo_communicator> cross;
  if (layout.hosts > 1) {
    unless_aborted("the cross-host step's connection");
    auto c = ctx_;
    c.rank = layout.host;
    c.size = layout.hosts;
    c.store_prefix = ctx_.store_prefix + "shm/cross" + std::to_string(layout.member) + "/";
    cross = std::make_unique<gloo_communicator>(c);
    cross->connect();
  }
  spdlog::info("troupe set rank {}/{}: shared-memory allreduce on host '{}' ({} of {}): local "
               "rank {} of {}, segment {}, {}",
               ctx_.rank, ctx_.size, ctx_.host, layout.host, layout.hosts, layout.member,
               layout.members, segment_name_,
               cross ? "cross-host step over Gloo" : "no cross-host step");
  std::lock_guard<std::mutex> lock(mutex_);
  group_ = std::move(group);
  cross_ = std::move(cross);
  one_host_ = layout.hosts == 1;
  if (aborted_) {
    group_->abort();
    if (cross_)
      cross_->abort();
  }
}

size_t shm_communicator::chunk_bytes() const {
  return group_ ? cache_sized_chunk_bytes : gloo_communicator::chunk_bytes();
}

void shm_communicator::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    if (group_)
      group_->abort();
    if (cross_)
      cross_->abort();
  }
  gloo_communicator::abort();
}

void shm_communicator::allreduce(const allreduce_options& opts) {
  if (!group_) {
    gloo_communicator::allreduce(opts);
    return;
  }
  if (opts.count == 0)
    return;
  allreduce_pieces(buffer_piece{opts.data, opts.count * element_size(opts.dtype)}, opts.dtype,
                     opts.op, {});
}

bool shm_communicator::reduces_pieces() const {
  return group_ != nullptr;
}

void shm_communicator::allreduce_pieces(piece_span pieces, data_type dtype,
                                        reduce_op op, const element_finish& finish) {
  if (!group_)
    communicator::allreduce_pieces(pieces, dtype, op, finish);  // throws
  const size_t element_bytes = element_size(dtype);
  shm_group::cross_step cross;
  if (cross_)
    cross = [&](void* data, size_t count) {
      cross_->ring_allreduce({data, count, dtype, op});
      cross_bytes_ += count * element_bytes;
    };
  group_->allreduce(pieces, element_bytes, reduction_of(dtype, op), cross, finish);
  ++allreduces_;
  for (const auto& p : pieces)
    bytes_ += p.bytes;
}

// Across hosts with a segment on each, a reducescatter stays an allreduce
// through the segments (hierarchical) that keeps this rank's rows.
bool shm_communicator::reduces_scatter(size_t count) const {
  return one_host_ || (!group_ && gloo_communicator::reduces_scatter(count));
}

void shm_communicator::reducescatter(const reducescatter_options& opts) {
  if (!group_) {
    gloo_communicator::reducescatter(opts);
    return;
  }
  if (!one_host_)
    communicator::reducescatter(opts);  // throws
  group_->reduce_scatter(opts.input, opts.output, opts.counts, element_size(opts.dtype),
                         reduction_of(opts.dtype, opts.op), opts.finish);
  ++others_;
  other_bytes_ +=
    std::accumulate(opts.counts.begin(), opts.counts.end(), size_t{0}) * element_size(opts.dtype);
}

void shm_communicator::allgather(const allgather_options& opts) {
  if (!one_host_) {
    gloo_communicator::allgather(opts);
    return;
  }
  const size_t element_bytes = element_size(opts.dtype);
  std::vector<size_t> bytes;
  bytes.reserve(opts.counts.size());
  for (auto c : opts.counts)
    bytes.push_back(c * element_bytes);
  group_->allgather(opts.input, opts.output, bytes);
  ++others_;
  other_bytes_ += bytes.at(static_cast<size_t>(ctx_.rank));
}

void shm_communicator::broadcast(const broadcast_options& opts) {
  if (!one_host_) {
    gloo_communicator::broadcast(opts);
    return;
  }
  const size_t bytes = opts.count * element_size(opts.dtype);
  group_->broadcast(opts.data, bytes, opts.root);
  ++others_;
  other_bytes_ += bytes;
}

void shm_communicator::alltoall(const alltoall_options& opts) {
  if (!one_host_) {
    gloo_communicator::alltoall(opts);
    return;
  }
  const std::vector<size_t> send(opts.send_bytes.begin(), opts.send_bytes.end());
  const std::vector<size_t> recv(opts.recv_bytes.begin(), opts.recv_bytes.end());
  group_->alltoall(opts.input, send, opts.output, recv);
  ++others_;
  ++alltoalls_;
  other_bytes_ += std::accumulate(send.begin(), send.end(), size_t{0});
}

void shm_communicator::alltoall_rows(const void* input, const std::vector<int64_t>& send_rows,
                                     size_t row_bytes, const row_placement& place) {
  if (one_host_)
    communicator::alltoall_rows(input, send_rows, row_bytes, place);
  else
    gloo_communicator::alltoall_rows(input, send_rows, row_bytes, place);
}

void shm_communicator::barrier() {
  if (!one_host_) {
    gloo_communicator::barrier();
    return;
  }
  group_->sync();
  ++others_;
}

} // namespace troupe::backends
