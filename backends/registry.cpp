// The only file that knows which backends were compiled in.
#include "backends/registry.hpp"

#include <string_view>

#include "backends/config.h"
#include "backends/cpu/cpu_backend.hpp"
#include "backends/local/local_communicator.hpp"
#if TROUPE_HAVE_GLOO
#include "backends/gloo/gloo_communicator.hpp"
#include "backends/shm/shm_communicator.hpp"
#endif
#if TROUPE_HAVE_MPI
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_environment.hpp"
#endif

namespace troupe::backends {

std::vector<std::string> built_cpu_backends() {
  std::vector<std::string> names;
#if TROUPE_HAVE_GLOO
  names.emplace_back("gloo");
#endif
#if TROUPE_HAVE_MPI
  names.emplace_back("mpi");
#endif
  return names;
}

std::string missing_backend(device_kind kind) {
  switch (kind) {
    case device_kind::cpu: return {};
    case device_kind::cuda: return "this build has no GPU backend (NCCL: TROUPE_WITH_NCCL)";
  }
  return "device kind " + std::to_string(static_cast<int>(kind)) + " is unknown to this build";
}

namespace {

std::unique_ptr<communicator> make_cpu_communicator(const backend_context& ctx,
                                                    const std::string& name) {
  if (ctx.size == 1)
    return std::make_unique<local_communicator>();
  const auto chosen = !name.empty() ? name : ctx.store ? "gloo" : "mpi";
#if TROUPE_HAVE_GLOO
  if (chosen == "gloo") {
    if (!ctx.store)
      throw backend_error("the gloo backend needs troupe-run's rendezvous store; under "
                          "mpirun use TROUPE_CPU_OPERATIONS=mpi");
    if (ctx.shared_memory)
      return std::make_unique<shm_communicator>(ctx);
    return std::make_unique<gloo_communicator>(ctx);
  }
#endif
#if TROUPE_HAVE_MPI
  if (chosen == "mpi") {
    if (!launched_by_mpirun())
      throw backend_error("the mpi backend needs a job started by mpirun (troupe-run --mpi)");
    return std::make_unique<mpi_communicator>(ctx.world_ranks, ctx.communicator_tag);
  }
#endif
  std::string have;
  for (const auto& b : built_cpu_backends())
    have += (have.empty() ? "" : ", ") + b;
  throw backend_error("CPU backend '" + chosen + "' is not built into this Troupe (built: " +
                      (have.empty() ? "none" : have) + ")");
}

} // namespace

std::unique_ptr<backend> make_cpu_backend(const backend_context& ctx, const std::string& name) {
  auto comm = make_cpu_communicator(ctx, name);
  // Measured on the ResNet-50 step (docs/benchmarks.md): 1 MiB chunks bring
  // MPI to its one-tensor-at-a-time speed; Gloo's per-call cost makes any
  // chunking slower than one call.
  const int64_t chunk = ctx.fusion_chunk_bytes >= 0 ? ctx.fusion_chunk_bytes
                        : std::string_view(comm->name()) == "mpi" ? int64_t{1} << 20
                                                                   : 0;
  return std::make_unique<cpu_backend>(std::move(comm), ctx.rank, ctx.size,
                                       static_cast<size_t>(chunk));
}

std::optional<external_launch> detect_external_launch() {
#if TROUPE_HAVE_MPI
  if (launched_by_mpirun()) {
    return external_launch{mpi_world_identity(), mpi_allgather_strings};
  }
#endif
  return std::nullopt;
}

} // namespace troupe::backends
