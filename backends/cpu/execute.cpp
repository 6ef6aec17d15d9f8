#include "backends/cpu/execute.hpp"

#include <cctype>

#include "backends/cpu/collectives/collectives.hpp"
#include "proto/op_properties.hpp"

namespace troupe::backends {

namespace {

void run(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e) {
  switch (resp.op()) {
    case v1::OP_TYPE_ALLREDUCE: return run_allreduce(ctx, resp, e);
    case v1::OP_TYPE_REDUCESCATTER: return run_reducescatter(ctx, resp, e);
    case v1::OP_TYPE_ALLGATHER: return run_allgather(ctx, resp, e);
    case v1::OP_TYPE_BROADCAST: return run_broadcast(ctx, resp, e);
    case v1::OP_TYPE_ALLTOALL: return run_alltoall(ctx, e);
    case v1::OP_TYPE_BARRIER: return ctx.comm.barrier();
    default:
      throw backend_error("operation " + std::string(properties(resp.op()).name) +
                          " is not executable by this runtime version");
  }
}

} // namespace

std::string backend_activity(const run_context& ctx, v1::OpType op) {
  std::string name = ctx.comm.name();
  for (auto& c : name)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name + "_" + properties(op).name;
}

status execute(const run_context& ctx, actors::collective_work& work) {
  try {
    const bool fused = work.entries.size() > 1;
    if (fused && work.response.op() == v1::OP_TYPE_ALLREDUCE) {
      run_fused_allreduce(ctx, work.response, work.entries);
    } else if (fused && work.response.op() == v1::OP_TYPE_REDUCESCATTER) {
      run_fused_reducescatter(ctx, work.response, work.entries);
    } else if (fused && work.response.op() == v1::OP_TYPE_ALLGATHER) {
      run_fused_allgather(ctx, work.response, work.entries);
    } else {
      const auto activity = ctx.trace ? backend_activity(ctx, work.response.op()) : "";
      ctx.span(activity, 'B');
      for (auto& entry : work.entries)
        run(ctx, work.response, *entry);
      ctx.span(activity, 'E');
    }
  } catch (const backend_error& e) {
    return {status_code::backend, e.what()};
  } catch (const std::exception& e) {
    // This rank left the work where its peers may be inside it (no memory
    // for a result): its next work would meet their pending one on the
    // same links or segment, and each side would take the other's bytes
    // for its own. The communicator is done.
    ctx.comm.abort();
    return {status_code::backend, e.what()};
  }
  // A tensor whose allocator gave no memory fails alone: the others of a
  // fused work hold their results here as on the peers. Their handles are
  // completed here; the work's status is the first failure's.
  status failed;
  for (const auto& entry : work.entries)
    if (!entry->allocation_failure.empty() && failed.ok())
      failed = {status_code::internal, entry->allocation_failure};
  if (failed.ok() || work.entries.size() == 1)
    return failed;
  for (const auto& entry : work.entries)
    entry->handle->complete(entry->allocation_failure.empty()
                              ? status{}
                              : status{status_code::internal, entry->allocation_failure});
  return failed;
}

} // namespace troupe::backends
