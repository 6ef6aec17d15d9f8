#pragma once

#include <string>
#include <vector>

#include "elastic/launcher/options.hpp"

namespace troupe::elastic::launcher {

/// The Open MPI command line that runs the job `opts` describes, as
/// horovodrun --mpi builds it: ranks on the given hosts, output tagged,
/// oversubscription allowed (-np is the user's choice, not the core count),
/// --allow-run-as-root when `as_root`, ranks bound to CPUs as `cpu_binding`
/// (TROUPE_CPU_BINDING) says; on several hosts (-H, --hostfile) `-x` for
/// every knob and every TROUPE_* / HOROVOD_* variable of `environment`
/// (NAME=VALUE entries: troupe-run's), which mpirun passes on to the other
/// hosts' ranks only so. Throws std::invalid_argument when "cpu" asks for
/// more ranks than this host has CPUs.
std::vector<std::string> mpirun_command(const launch_options& opts, bool as_root,
                                        const std::string& cpu_binding,
                                        const std::vector<std::string>& environment = {});

} // namespace troupe::elastic::launcher
