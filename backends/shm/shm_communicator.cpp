#include "backends/shm/shm_communicator.hpp"

#include <unistd.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "backends/gloo/gloo_reduction.hpp"
#include "backends/shm/shm_group.hpp"
#include "elastic/store.hpp"
#include "elastic/store_exchange.hpp"

namespace troupe::backends {

namespace {

// Bytes of one member's slot, the size of a round: the round's slots and
// result (L + 1 of them on L ranks) stay in the caches of a few cores.
constexpr size_t slot_bytes = size_t{256} << 10;

// Where this rank sits among the set's ranks grouped by host.
struct host_layout {
  int host = 0;        // index of this rank's host, in order of first rank
  int hosts = 1;
  int member = 0;      // this rank's index among its host's ranks
  int members = 1;     // ranks on this rank's host
  bool uniform = true;  // every host has `members` ranks
};

host_layout layout_of(const std::vector<std::string>& host_of_rank, int rank) {
  std::map<std::string, int> index;
  std::vector<int> count;
  host_layout l;
  for (int r = 0; r < static_cast<int>(host_of_rank.size()); ++r) {
    auto [it, fresh] = index.emplace(host_of_rank[r], static_cast<int>(count.size()));
    if (fresh)
      count.push_back(0);
    if (r == rank) {
      l.host = it->second;
      l.member = count[it->second];
    }
    ++count[it->second];
  }
  l.hosts = static_cast<int>(count.size());
  l.members = count[l.host];
  for (int c : count)
    l.uniform = l.uniform && c == l.members;
  return l;
}

// A name no other segment has: the creator's pid and 64 random bits.
std::string fresh_segment_name() {
  std::random_device random;
  const uint64_t bits = uint64_t{random()} << 32 | random();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  return "/troupe-" + std::to_string(::getpid()) + "-" + hex;
}

} // namespace

shm_communicator::shm_communicator(backend_context ctx)
    : gloo_communicator(ctx), ctx_(std::move(ctx)) {
}

shm_communicator::~shm_communicator() {
  if (group_)
    spdlog::info("troupe set rank {}/{}: shared-memory allreduce: {} allreduces, {} bytes through "
                 "segment {}, {} bytes of this rank's shares across hosts",
                 ctx_.rank, ctx_.size, allreduces_, bytes_, segment_name_, cross_bytes_);
}

void shm_communicator::connect() {
  gloo_communicator::connect();
  auto& store = *ctx_.store;
  // Every rank's host, in one listing once all published theirs (O(1) store
  // operations per rank, as the Gloo mesh's rendezvous).
  const auto hosts_prefix = ctx_.store_prefix + "shm/host/";
  store.set(hosts_prefix + std::to_string(ctx_.rank), ctx_.host);
  const auto host_of_rank = elastic::gather_published(
    store, hosts_prefix, ctx_.store_prefix + "shm/hosts-published/", ctx_.size, ctx_.timeout);
  const auto layout = layout_of(host_of_rank, ctx_.rank);
  if (layout.members < 2 || !layout.uniform) {
    spdlog::info("troupe set rank {}/{}: shared-memory allreduce off, Gloo for everything: {}",
                 ctx_.rank, ctx_.size,
                 layout.uniform ? "one rank per host"
                                : "hosts of the set have different numbers of ranks");
    return;
  }

  const auto name_key = ctx_.store_prefix + "shm/segment/" + std::to_string(layout.host);
  auto segment = [&] {
    const auto bytes = shm_group::segment_bytes(layout.members, slot_bytes);
    if (layout.member > 0)
      return shm_segment::open(store.wait_get(name_key, ctx_.timeout), bytes);
    auto created = shm_group::create_segment(fresh_segment_name(), layout.members, slot_bytes);
    store.set(name_key, created.name());
    return created;
  }();
  segment_name_ = segment.name();
  auto group = std::make_unique<shm_group>(std::move(segment), layout.member, layout.members,
                                           ctx_.timeout);
  std::unique_ptr<gloo_communicator> cross;
  if (layout.hosts > 1) {
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
  if (aborted_) {
    group_->abort();
    if (cross_)
      cross_->abort();
  }
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
  const size_t element_bytes = element_size(opts.dtype);
  shm_group::cross_step cross;
  if (cross_)
    cross = [&](void* data, size_t count) {
      auto part = opts;
      part.data = data;
      part.count = count;
      cross_->allreduce(part);
      cross_bytes_ += count * element_bytes;
    };
  group_->allreduce(opts.data, opts.count, element_bytes, reduction_of(opts.dtype, opts.op),
                    cross);
  ++allreduces_;
  bytes_ += opts.count * element_bytes;
}

} // namespace troupe::backends
