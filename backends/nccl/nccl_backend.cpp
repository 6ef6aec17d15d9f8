#include "backends/nccl/nccl_backend.hpp"

#include <cstring>

#include "backends/cuda/cuda_runtime.hpp"
#include "backends/nccl/nccl_collectives.hpp"
#include "backends/set_hosts.hpp"
#include "elastic/store.hpp"
#include "proto/op_properties.hpp"

namespace troupe::backends {

/// What the backend keeps per CUDA device of this rank.
struct nccl_backend::device {
  cuda::stream stream;
  cuda::event producer;  // scratch for cuda::wait_for_producer
  cuda::growing_buffer fusion{cuda::growing_buffer::where::device, stream.get()};
  cuda::growing_buffer host{cuda::growing_buffer::where::pinned_host, nullptr};
  std::shared_ptr<nccl_comm> comm;
  /// The hierarchical collectives' communicators: the set's ranks on this
  /// host, the ranks of this local index on every host; null when flat.
  std::shared_ptr<nccl_comm> local;
  std::shared_ptr<nccl_comm> cross;
  std::unique_ptr<nccl_hierarchy> hierarchy;

  /// Every communicator of the device, flat first.
  std::vector<std::shared_ptr<nccl_comm>> comms() const {
    std::vector<std::shared_ptr<nccl_comm>> all{comm};
    if (local)
      all.insert(all.end(), {local, cross});
    return all;
  }
};

namespace {

// A work on the GPU: finished once the event recorded after its last
// kernel has completed. A communicator error seen meanwhile (a peer failed)
// has aborted the communicator, which stops those kernels, and fails it.
class nccl_completion : public completion {
public:
  /// `failure`: why the work already failed ("" = not), reported once the
  /// GPU has run what was enqueued of it. `timing`, when a timeline is
  /// written: the fusion buffer's copies, timed against `done` (timed too).
  nccl_completion(std::unique_ptr<cuda::event> done, std::vector<std::shared_ptr<nccl_comm>> comms,
                  const actors::collective_work& work, std::string activity,
                  std::unique_ptr<fusion_copy_timing> timing, std::string failure = {})
    : done_(std::move(done)), comms_(std::move(comms)), trace_(work.trace),
      past_trace_(work.past_trace), activity_(std::move(activity)), timing_(std::move(timing)),
      failure_(std::move(failure)) {
  }

  std::optional<status> poll() override {
    for (const auto& comm : comms_)
      if (failure_.empty())
        if (auto why = comm->async_error(); !why.empty())
          failure_ = "nccl " + activity_ + ": " + why;
    try {
      if (!done_->done())
        return std::nullopt;
    } catch (const backend_error& e) {
      failure_ = e.what();
    }
    if (failure_.empty())
      trace_copies();
    if (trace_)
      trace_(activity_, 'E');
    if (!failure_.empty())
      return status{status_code::backend, failure_};
    return status{};
  }

private:
  // The copies' spans end where the GPU put them before the work's end,
  // which is about now (the poll's back-off: at most 1 ms later). A
  // timing the GPU cannot give leaves the spans out; the work succeeded.
  void trace_copies() {
    if (!timing_ || !past_trace_)
      return;
    const auto trace = [&](const char* activity, const timed_span& span) {
      if (span.recorded)
        past_trace_(activity, cuda::elapsed_us(span.begin, *done_),
                    cuda::elapsed_us(span.end, *done_));
    };
    try {
      trace("MEMCPY_IN_FUSION_BUFFER", timing_->in);
      trace("MEMCPY_OUT_FUSION_BUFFER", timing_->out);
    } catch (const backend_error&) {
      // cudaEventElapsedTime failed: no span.
    }
  }

  std::unique_ptr<cuda::event> done_;
  std::vector<std::shared_ptr<nccl_comm>> comms_;
  actors::activity_trace trace_;
  actors::past_activity_trace past_trace_;
  std::string activity_;
  std::unique_ptr<fusion_copy_timing> timing_;
  std::string failure_;
};

void run(const nccl_run_context& ctx, actors::collective_work& work) {
  const auto& resp = work.response;
  switch (resp.op()) {
    case v1::OP_TYPE_ALLREDUCE: return nccl_allreduce(ctx, resp, work.entries);
    case v1::OP_TYPE_ALLGATHER: return nccl_allgather(ctx, resp, work.entries);
    default: break;
  }
  for (auto& e : work.entries) {
    switch (resp.op()) {
      case v1::OP_TYPE_BROADCAST: nccl_broadcast(ctx, resp, *e); break;
      case v1::OP_TYPE_ALLTOALL: nccl_alltoall(ctx, *e); break;
      case v1::OP_TYPE_REDUCESCATTER: nccl_reducescatter(ctx, resp, *e); break;
      default:
        throw backend_error("operation " + std::string(properties(resp.op()).name) +
                            " does not run on the NCCL backend");
    }
  }
}

// The unique id under `key` of a communicator of `members` ranks: drawn
// and stored by one of them (`draws`), read by the others.
ncclUniqueId shared_unique_id(const backend_context& ctx, const std::string& key, bool draws,
                              int members) {
  ncclUniqueId id;
  if (draws)
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (members == 1)
    return id;
  if (!ctx.store)
    throw backend_error("the NCCL backend exchanges its unique id through troupe-run's store, "
                        "which this job lacks; TROUPE_GPU_OPERATIONS=mpi runs CUDA tensors "
                        "over MPI instead");
  try {
    if (draws) {
      ctx.store->set(key, std::string(id.internal, sizeof id.internal));
    } else {
      const auto value = ctx.store->wait_get(key, ctx.timeout);
      if (value.size() != sizeof id.internal)
        throw backend_error("'" + key + "' holds " + std::to_string(value.size()) +
                            " bytes, not an NCCL unique id");
      std::memcpy(id.internal, value.data(), sizeof id.internal);
    }
  } catch (const elastic::store_error& e) {
    throw backend_error(std::string("NCCL unique id through the store: ") + e.what());
  }
  return id;
}

} // namespace

nccl_backend::nccl_backend(backend_context ctx) : ctx_(std::move(ctx)) {
}

nccl_backend::~nccl_backend() {
  // Each device's memory and handles go with that device current.
  for (auto& [ordinal, d] : devices_) {
    cuda::device_guard on(ordinal);
    d.reset();
  }
}

const host_layout* nccl_backend::two_levels() {
  if (!(ctx_.hierarchical_allreduce || ctx_.hierarchical_allgather) || ctx_.size == 1 ||
      !ctx_.store)
    return nullptr;
  if (!layout_) {
    try {
      layout_ = layout_of(exchange_hosts(ctx_, "nccl/"), ctx_.rank);
    } catch (const elastic::store_error& e) {
      throw backend_error(std::string("the hosts of the NCCL backend's members: ") + e.what());
    }
  }
  return has_two_levels(*layout_) ? &*layout_ : nullptr;
}

nccl_backend::device& nccl_backend::device_for(int ordinal) {
  {
    std::lock_guard lock(devices_mutex_);
    if (auto it = devices_.find(ordinal); it != devices_.end())
      return *it->second;
  }
  auto d = std::make_unique<device>();
  // Every member makes its n-th communicator in the same work (works run
  // in the same order everywhere), so the n-th unique id is theirs. The
  // two levels' ids are drawn by the first rank of each group.
  const auto key = ctx_.store_prefix + "nccl/" + std::to_string(communicators_made_++);
  const auto join = [&](const std::string& id_key, int rank, int size) {
    return std::make_shared<nccl_comm>(shared_unique_id(ctx_, id_key, rank == 0, size), rank, size,
                                       ctx_.timeout, aborted_);
  };
  d->comm = join(key, ctx_.rank, ctx_.size);
  if (const auto* l = two_levels()) {
    d->local = join(key + "/local" + std::to_string(l->host), l->member, l->members);
    d->cross = join(key + "/cross" + std::to_string(l->member), l->host, l->hosts);
    d->hierarchy = std::make_unique<nccl_hierarchy>(nccl_hierarchy{
      *l, *d->local, *d->cross, ctx_.hierarchical_allreduce, ctx_.hierarchical_allgather});
  }
  std::lock_guard lock(devices_mutex_);
  auto& placed = devices_[ordinal];
  placed = std::move(d);
  // An abort() that came while the communicators were made did not see them.
  if (aborted_)
    for (const auto& comm : placed->comms())
      comm->abort();
  return *placed;
}

std::unique_ptr<completion> nccl_backend::start(actors::collective_work& work) {
  const auto activity = "NCCL_" + std::string(properties(work.response.op()).name);
  const auto span = [&](char phase) {
    if (work.trace)
      work.trace(activity, phase);
  };
  span('B');
  device* dev = nullptr;
  int ordinal = 0;
  std::unique_ptr<fusion_copy_timing> timing;
  try {
    if (aborted_)
      throw backend_error("nccl " + activity +
                          ": the backend was aborted (a member was lost or the set reset)");
    int fallback = 0;
    {
      std::lock_guard lock(devices_mutex_);
      if (!devices_.empty())
        fallback = devices_.begin()->first;
    }
    ordinal = cuda::work_device(work, fallback);
    cuda::device_guard on(ordinal);
    dev = &device_for(ordinal);
    for (const auto& e : work.entries)
      if (e->input.device.kind == device_kind::cuda)
        cuda::wait_for_producer(e->input.device, dev->stream.get(), dev->producer);
    const auto op = work.response.op();
    if (work.past_trace && (op == v1::OP_TYPE_ALLREDUCE || op == v1::OP_TYPE_ALLGATHER))
      timing = std::make_unique<fusion_copy_timing>();
    run({*dev->comm, dev->stream.get(), ctx_.rank, ctx_.size, dev->fusion, dev->host,
         ctx_.timeout, dev->hierarchy.get(), timing.get()},
        work);
    auto done = std::make_unique<cuda::event>(timing ? cuda::event::timing::on
                                                     : cuda::event::timing::off);
    done->record(dev->stream.get());
    return std::make_unique<nccl_completion>(std::move(done), dev->comms(), work, activity,
                                             std::move(timing));
  } catch (const std::exception& e) {
    // What was enqueued before the failure may still use the caller's
    // memory: the work fails once the stream has run it.
    if (dev != nullptr) {
      try {
        cuda::device_guard on(ordinal);
        auto done = std::make_unique<cuda::event>();
        done->record(dev->stream.get());
        return std::make_unique<nccl_completion>(std::move(done), dev->comms(), work, activity,
                                                 nullptr, e.what());
      } catch (const backend_error&) {
        // The device failed for good: nothing of the work runs any more.
      }
    }
    span('E');
    return std::make_unique<finished>(status{status_code::backend, e.what()});
  }
}

void nccl_backend::abort() {
  aborted_ = true;
  std::lock_guard lock(devices_mutex_);
  for (auto& [ordinal, d] : devices_)
    for (const auto& comm : d->comms())
      comm->abort();
}

} // namespace troupe::backends
