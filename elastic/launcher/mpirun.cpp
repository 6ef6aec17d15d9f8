#include "elastic/launcher/mpirun.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <unistd.h>

namespace troupe::elastic::launcher {

std::vector<std::string> mpirun_command(const launch_options& opts, bool as_root) {
  // Not bound to one core (Open MPI's default for np <= 2): a rank's actor,
  // network and backend threads would share it (Horovod passes the same),
  // unless the user's mpirun arguments bind otherwise.
  std::vector<std::string> cmd{"mpirun", "--tag-output", "--oversubscribe"};
  const bool binds = std::any_of(opts.mpi_args.begin(), opts.mpi_args.end(), [](auto& a) {
    return a == "--bind-to" || a == "-bind-to" || a.rfind("--bind-to=", 0) == 0;
  });
  if (!opts.binding_args.empty())
    cmd.insert(cmd.end(), opts.binding_args.begin(), opts.binding_args.end());
  else if (!binds)
    cmd.insert(cmd.end(), {"--bind-to", "none"});
  if (as_root)
    cmd.emplace_back("--allow-run-as-root");
  cmd.insert(cmd.end(), {"-np", std::to_string(opts.np)});
  if (!opts.hosts.empty())
    cmd.insert(cmd.end(), {"-H", opts.hosts});
  if (!opts.hostfile.empty())
    cmd.insert(cmd.end(), {"--hostfile", opts.hostfile});
  if (opts.timeout_seconds)
    cmd.insert(cmd.end(), {"--timeout", std::to_string(static_cast<long>(
                                          std::ceil(*opts.timeout_seconds)))});
  if (!opts.output_dir.empty())
    cmd.insert(cmd.end(), {"--output-filename", opts.output_dir});
  if (opts.prefix_timestamp)
    cmd.emplace_back("--timestamp-output");
  cmd.insert(cmd.end(), opts.mpi_args.begin(), opts.mpi_args.end());
  cmd.insert(cmd.end(), opts.command.begin(), opts.command.end());
  return cmd;
}

int exec_mpirun(const launch_options& opts) {
  for (const auto& [name, value] : opts.knobs)
    ::setenv(name.c_str(), value.c_str(), 1);
  auto cmd = mpirun_command(opts, ::geteuid() == 0);
  std::vector<char*> argv;
  for (auto& arg : cmd)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::cerr << "troupe-run: cannot start mpirun: " << std::strerror(errno)
            << " (install openmpi-bin)\n";
  return 127;
}

} // namespace troupe::elastic::launcher
