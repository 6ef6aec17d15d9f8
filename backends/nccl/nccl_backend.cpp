#include "backends/nccl/nccl_backend.hpp"

#include <cstring>

#include "backends/cuda/cuda_runtime.hpp"
#include "backends/nccl/nccl_collectives.hpp"
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
};

namespace {

// A work on the GPU: finished once the event recorded after its last
// kernel has completed. A communicator error seen meanwhile (a peer failed)
// has aborted the communicator, which stops those kernels, and fails it.
class nccl_completion : public completion {
public:
  /// `failure`: why the work already failed ("" = not), reported once the
  /// GPU has run what was enqueued of it.
  nccl_completion(std::unique_ptr<cuda::event> done, std::shared_ptr<nccl_comm> comm,
                  actors::activity_trace trace, std::string activity, std::string failure = {})
    : done_(std::move(done)), comm_(std::move(comm)), trace_(std::move(trace)),
      activity_(std::move(activity)), failure_(std::move(failure)) {
  }

  std::optional<status> poll() override {
    if (failure_.empty())
      if (auto why = comm_->async_error(); !why.empty())
        failure_ = "nccl " + activity_ + ": " + why;
    try {
      if (!done_->done())
        return std::nullopt;
    } catch (const backend_error& e) {
      failure_ = e.what();
    }
    if (trace_)
      trace_(activity_, 'E');
    if (!failure_.empty())
      return status{status_code::backend, failure_};
    return status{};
  }

private:
  std::unique_ptr<cuda::event> done_;
  std::shared_ptr<nccl_comm> comm_;
  actors::activity_trace trace_;
  std::string activity_;
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

nccl_backend::device& nccl_backend::device_for(int ordinal) {
  {
    std::lock_guard lock(devices_mutex_);
    if (auto it = devices_.find(ordinal); it != devices_.end())
      return *it->second;
  }
  auto d = std::make_unique<device>();
  // Every member makes its n-th communicator in the same work (works run
  // in the same order everywhere), so the n-th unique id is theirs.
  const auto key = ctx_.store_prefix + "nccl/" + std::to_string(communicators_made_++);
  ncclUniqueId id;
  if (ctx_.rank == 0)
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (ctx_.size > 1) {
    if (!ctx_.store)
      throw backend_error("the NCCL backend exchanges its unique id through troupe-run's store, "
                          "which this job lacks; TROUPE_GPU_OPERATIONS=mpi runs CUDA tensors "
                          "over MPI instead");
    try {
      if (ctx_.rank == 0) {
        ctx_.store->set(key, std::string(id.internal, sizeof id.internal));
      } else {
        const auto value = ctx_.store->wait_get(key, ctx_.timeout);
        if (value.size() != sizeof id.internal)
          throw backend_error("'" + key + "' holds " + std::to_string(value.size()) +
                              " bytes, not an NCCL unique id");
        std::memcpy(id.internal, value.data(), sizeof id.internal);
      }
    } catch (const elastic::store_error& e) {
      throw backend_error(std::string("NCCL unique id through the store: ") + e.what());
    }
  }
  d->comm = std::make_shared<nccl_comm>(id, ctx_.rank, ctx_.size, ctx_.timeout, aborted_);
  std::lock_guard lock(devices_mutex_);
  auto& placed = devices_[ordinal];
  placed = std::move(d);
  // An abort() that came while the communicator was made did not see it.
  if (aborted_)
    placed->comm->abort();
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
    run({*dev->comm, dev->stream.get(), ctx_.rank, ctx_.size, dev->fusion, dev->host,
         ctx_.timeout},
        work);
    auto done = std::make_unique<cuda::event>();
    done->record(dev->stream.get());
    return std::make_unique<nccl_completion>(std::move(done), dev->comm, work.trace, activity);
  } catch (const std::exception& e) {
    // What was enqueued before the failure may still use the caller's
    // memory: the work fails once the stream has run it.
    if (dev != nullptr) {
      try {
        cuda::device_guard on(ordinal);
        auto done = std::make_unique<cuda::event>();
        done->record(dev->stream.get());
        return std::make_unique<nccl_completion>(std::move(done), dev->comm, work.trace,
                                                 activity, e.what());
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
    d->comm->abort();
}

} // namespace troupe::backends
