#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::elastic::launcher {

/// troupe-run's command line, parsed and checked.
struct launch_options {
  int np = 0;
  std::string hosts;    // -H text, empty when not given
  std::string hostfile; // --hostfile path, empty when not given
  std::optional<double> timeout_seconds;
  /// --mpi: hand the launch to mpirun (ranks bootstrap through MPI).
  bool use_mpirun = false;
  /// Worker knobs set by flags: (environment variable, value).
  std::vector<std::pair<std::string, std::string>> knobs;
  std::vector<std::string> command;
};

/// Either options to run with, or an exit code to return at once (after
/// --help, or after a usage error that has been printed to stderr).
struct parse_result {
  std::optional<launch_options> options;
  int exit_code = 0;
};

parse_result parse_options(int argc, char** argv);

} // namespace troupe::elastic::launcher
