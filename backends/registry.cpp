// The only file that knows which backends were compiled in.
#include "backends/registry.hpp"

#include <unistd.h>

#include "backends/config.h"
#include "backends/cpu/cpu_backend.hpp"
#include "backends/local/local_communicator.hpp"
#include "backends/thread_affinity.hpp"
#if TROUPE_HAVE_GLOO
#include "backends/gloo/gloo_communicator.hpp"
#include "backends/shm/shm_communicator.hpp"
#endif
#if TROUPE_HAVE_MPI
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_environment.hpp"
#endif
#if TROUPE_HAVE_CUDA
#include "backends/cuda/cuda_runtime.hpp"
#include "backends/cuda/staging_backend.hpp"
#endif
#if TROUPE_HAVE_NCCL
#include <nccl.h>

#include "backends/nccl/nccl_backend.hpp"
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

bool cuda_built() {
  return TROUPE_HAVE_CUDA != 0;
}

bool nccl_built() {
  return TROUPE_HAVE_NCCL != 0;
}

int nccl_version() {
#if TROUPE_HAVE_NCCL
  return NCCL_VERSION_CODE;
#else
  return 0;
#endif
}

bool mpi_started() {
#if TROUPE_HAVE_MPI
  return mpi_initialized();
#else
  return false;
#endif
}

bool mpi_thread_multiple() {
#if TROUPE_HAVE_MPI
  return mpi_initialized() && mpi_concurrent_threads();
#else
  return false;
#endif
}

bool mpi_yielding() {
#if TROUPE_HAVE_MPI
  return mpi_yields_when_idle();
#else
  return false;
#endif
}

bool ranks_have_cores(int host_ranks, bool own_core) {
  if (mpi_started())
    return !mpi_yielding();
  return own_core || usable_cpus() >= host_ranks;
}

bool rank_bound(bool own_cpu) {
  if (own_cpu)
    return true;
  return mpi_started() && !mpi_yielding() && usable_cpus() < ::sysconf(_SC_NPROCESSORS_ONLN);
}

std::string missing_backend(device_kind kind) {
  switch (kind) {
    case device_kind::cpu: return {};
    case device_kind::cuda:
#if TROUPE_HAVE_CUDA
    {
      // The devices a process sees do not change while it runs.
      static const std::string problem = cuda::device_problem();
      return problem;
    }
#else
      return "this build has no GPU backend (NCCL: TROUPE_WITH_NCCL)";
#endif
  }
  return "device kind " + std::to_string(static_cast<int>(kind)) + " is unknown to this build";
}

std::string chosen_cpu_backend(const std::string& requested, bool have_store) {
  if (!requested.empty())
    return requested;
  return have_store ? "gloo" : "mpi";
}

namespace {

std::unique_ptr<communicator> make_cpu_communicator(const backend_context& ctx,
                                                    const std::string& name) {
  if (ctx.size == 1)
    return std::make_unique<local_communicator>();
  const auto chosen = chosen_cpu_backend(name, ctx.store != nullptr);
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
    // Every set's backend thread calls MPI on its own schedule.
    if (!ctx.world_ranks.empty() && !mpi_concurrent_threads())
      throw backend_error("MPI runs without MPI_THREAD_MULTIPLE here "
                          "(TROUPE_MPI_THREADS_DISABLE=1), so only the global process set may "
                          "use it: its backend thread and this set's would call MPI at once");
    return std::make_unique<mpi_communicator>(ctx);
  }
#endif
  std::string have;
  for (const auto& b : built_cpu_backends())
    have += (have.empty() ? "" : ", ") + b;
  throw backend_error("CPU backend '" + chosen + "' is not built into this Troupe (built: " +
                      (have.empty() ? "none" : have) + ")");
}

std::unique_ptr<backend> make_cpu_backend(const backend_context& ctx, const std::string& name) {
  auto comm = make_cpu_communicator(ctx, name);
  std::optional<size_t> chunk;
  if (ctx.fusion_chunk_bytes >= 0)
    chunk = static_cast<size_t>(ctx.fusion_chunk_bytes);
  return std::make_unique<cpu_backend>(std::move(comm), ctx.rank, ctx.size, chunk);
}

// Whether CUDA tensors get NCCL; throws when the choice cannot be had.
bool use_nccl(const backend_context& ctx, const backend_choice& choice) {
  const bool can = nccl_built() && (ctx.size == 1 || ctx.store);
  if (choice.gpu != "nccl")
    return choice.gpu.empty() && can;
  if (!nccl_built())
    throw backend_error("TROUPE_GPU_OPERATIONS=nccl, but this build has no NCCL backend "
                        "(TROUPE_WITH_NCCL)");
  if (!can)
    throw backend_error("TROUPE_GPU_OPERATIONS=nccl needs troupe-run's store for NCCL's unique "
                        "id; under mpirun use TROUPE_GPU_OPERATIONS=mpi");
  return true;
}

} // namespace

set_backends make_set_backends(const backend_context& ctx, const backend_choice& choice) {
  const bool nccl = use_nccl(ctx, choice);
  set_backends made;
  made.cpu = make_cpu_backend(ctx, choice.cpu);
  if (!cuda_built())
    return made;
  if (nccl) {
#if TROUPE_HAVE_NCCL
    made.gpu = std::make_unique<nccl_backend>(ctx);
#endif
    return made;
  }
  // Staged: the set's one CPU communicator serves both kinds of tensor.
  if (!choice.gpu.empty() && ctx.size > 1 && choice.gpu != made.cpu->name())
    throw backend_error("TROUPE_GPU_OPERATIONS=" + choice.gpu + " stages CUDA tensors through "
                        "the CPU backend, which is " + made.cpu->name() +
                        " here; set TROUPE_CPU_OPERATIONS=" + choice.gpu + " too");
#if TROUPE_HAVE_CUDA
  made.cpu = std::make_unique<staging_backend>(std::move(made.cpu));
  made.gpu_on_cpu = true;
#endif
  return made;
}

std::optional<external_launch> detect_external_launch(bool mpi_threads_disable) {
#if TROUPE_HAVE_MPI
  if (launched_by_mpirun()) {
    return external_launch{mpi_world_identity(mpi_threads_disable), mpi_allgather_strings};
  }
#endif
  return std::nullopt;
}

} // namespace troupe::backends
