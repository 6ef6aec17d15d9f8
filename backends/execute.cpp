#include "backends/execute.hpp"

#include "backends/collectives/collectives.hpp"

namespace troupe::backends {

namespace {

void run(const run_context& ctx, const v1::Response& resp, actors::tensor_entry& e) {
  switch (resp.op()) {
    case v1::OP_TYPE_ALLREDUCE: return run_allreduce(ctx, resp, e);
    case v1::OP_TYPE_REDUCESCATTER: return run_reducescatter(ctx, resp, e);
    case v1::OP_TYPE_ALLGATHER: return run_allgather(ctx, resp, e);
    case v1::OP_TYPE_BROADCAST: return run_broadcast(ctx, resp, e);
    case v1::OP_TYPE_ALLTOALL: return run_alltoall(ctx, e);
    case v1::OP_TYPE_BARRIER: return ctx.b.barrier();
    default:
      throw backend_error("operation " + v1::OpType_Name(resp.op()) +
                          " is not executable by this runtime version");
  }
}

} // namespace

status execute(const run_context& ctx, actors::collective_work& work) {
  try {
    if (work.response.op() == v1::OP_TYPE_ALLREDUCE && work.entries.size() > 1)
      run_fused_allreduce(ctx, work.response, work.entries);
    else
      for (auto& entry : work.entries)
        run(ctx, work.response, *entry);
  } catch (const backend_error& e) {
    return {status_code::backend, e.what()};
  } catch (const std::exception& e) {
    return {status_code::internal, e.what()};
  }
  return {};
}

} // namespace troupe::backends
