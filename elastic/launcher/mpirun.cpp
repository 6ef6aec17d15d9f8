#include "elastic/launcher/mpirun.hpp"

#include "elastic/launcher/cpu_binding.hpp"
#include "ipc/cpu_affinity.hpp"

#include <algorithm>
#include <set>

namespace troupe::elastic::launcher {

std::vector<std::string> mpirun_command(const launch_options& opts, bool as_root,
                                        const std::string& cpu_binding,
                                        const std::vector<std::string>& environment) {
  // Bound as --cpu-binding says (cpu_binding.hpp; Horovod passes --bind-to
  // none), unless the user's mpirun arguments bind otherwise.
  std::vector<std::string> cmd{"mpirun", "--tag-output", "--oversubscribe"};
  const auto given = [&](const char* flag) {
    const std::string dashed = std::string("-") + flag;
    return std::any_of(opts.mpi_args.begin(), opts.mpi_args.end(), [&](const std::string& a) {
      return a == dashed || a == "-" + dashed || a.rfind("-" + dashed + "=", 0) == 0;
    });
  };
  if (!opts.binding_args.empty()) {
    cmd.insert(cmd.end(), opts.binding_args.begin(), opts.binding_args.end());
  } else if (!given("bind-to")) {
    const bool one_host = opts.hosts.empty() && opts.hostfile.empty();
    const auto words = mpirun_binding(cpu_binding, opts.np, one_host,
                                      static_cast<int>(ipc::usable_cpu_list().size()));
    if (words.back() == "hwthread" && !given("map-by"))
      cmd.insert(cmd.end(), {"--map-by", "hwthread"});
    cmd.insert(cmd.end(), words.begin(), words.end());
  }
  if (as_root)
    cmd.emplace_back("--allow-run-as-root");
  cmd.insert(cmd.end(), {"-np", std::to_string(opts.np)});
  if (!opts.hosts.empty())
    cmd.insert(cmd.end(), {"-H", opts.hosts});
  if (!opts.hostfile.empty())
    cmd.insert(cmd.end(), {"--hostfile", opts.hostfile});
  // mpirun gives ranks on other hosts only the variables -x names: every
  // knob (the flags' and the user's own TROUPE_* / HOROVOD_*), by name, so
  // that no value lands on a command line.
  if (!opts.hosts.empty() || !opts.hostfile.empty()) {
    std::set<std::string> names;
    for (const auto& knob : opts.knobs)
      names.insert(knob.first);
    for (const auto& entry : environment) {
      const auto name = entry.substr(0, entry.find('='));
      if (name.rfind("TROUPE_", 0) == 0 || name.rfind("HOROVOD_", 0) == 0)
        names.insert(name);
    }
    for (const auto& name : names)
      cmd.insert(cmd.end(), {"-x", name});
  }
  if (!opts.output_dir.empty())
    cmd.insert(cmd.end(), {"--output-filename", opts.output_dir});
  if (opts.prefix_timestamp)
    cmd.emplace_back("--timestamp-output");
  cmd.insert(cmd.end(), opts.mpi_args.begin(), opts.mpi_args.end());
  cmd.insert(cmd.end(), opts.command.begin(), opts.command.end());
  return cmd;
}

} // namespace troupe::elastic::launcher
