#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/rank_layout.hpp"

namespace troupe::backends {

/// Names of the CPU backends this build has.
std::vector<std::string> built_cpu_backends();

/// Why a tensor on `kind` cannot run in this build ("this build has no GPU
/// backend (NCCL: TROUPE_WITH_NCCL)"), or "" when a backend for it exists.
std::string missing_backend(device_kind kind);

/// Creates the CPU backend of a process set over a communicator: none for
/// a set of one, else `name` ("gloo", "mpi"; "" = gloo when the launcher's
/// store is there, mpi under mpirun). Throws backend_error saying what is
/// missing when the choice cannot work in this build or launch.
std::unique_ptr<backend> make_cpu_backend(const backend_context& ctx, const std::string& name);

/// A job started by another launcher's library (mpirun): who this process
/// is, and an allgather of strings to bootstrap the control plane with.
struct external_launch {
  rank_layout layout;
  std::function<std::vector<std::string>(const std::string&)> allgather;
};

/// Set when mpirun started this process and this build has MPI (MPI gets
/// initialised); nothing otherwise. Throws backend_error if MPI fails.
std::optional<external_launch> detect_external_launch();

} // namespace troupe::backends
