#pragma once

#include "elastic/launcher/ssh_command.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::elastic::launcher {

/// Elastic mode's flags (Horovod's names and defaults).
struct elastic_flags {
  std::optional<int> min_np;  // default: -np
  std::optional<int> max_np;  // default: unbounded
  std::string discovery_script;
  std::optional<int> slots_per_host;
  std::optional<int> reset_limit;
  /// --blacklist-cooldown-range MIN MAX (seconds); none: out for good.
  std::optional<std::pair<int, int>> cooldown;
  double discovery_timeout_seconds = 10;
  /// Shell command prefix that starts a worker "on" $TROUPE_SPAWN_HOST.
  std::string spawn_command;
};

/// troupe-run's command line, parsed and checked.
struct launch_options {
  int np = 0;
  std::string hosts;    // -H text, empty when not given
  std::string hostfile; // --hostfile path, empty when not given
  std::optional<double> timeout_seconds;
  /// --mpi: hand the launch to mpirun (ranks bootstrap through MPI).
  bool use_mpirun = false;
  /// --mpi-args: more words for mpirun's command line, expanded as a shell
  /// expands them (horovodrun's flag).
  std::vector<std::string> mpi_args;
  /// --binding-args: mpirun's binding words, instead of "--bind-to none"
  /// (horovodrun's flag).
  std::vector<std::string> binding_args;
  /// --output-filename: each rank's output also goes to files in this
  /// folder (horovodrun's flag; under --mpi, mpirun's own).
  std::string output_dir;
  /// --prefix-output-with-timestamp: each output line starts with the local
  /// time (horovodrun's flag; under --mpi, mpirun's --timestamp-output).
  bool prefix_timestamp = false;
  /// --verbose: say what is started, and with which knobs, before starting it.
  bool verbose = false;
  /// How workers on other hosts are started (without --spawn-command).
  ssh_options ssh;
  /// Worker knobs set by flags: (environment variable, value).
  std::vector<std::pair<std::string, std::string>> knobs;
  std::vector<std::string> command;
  elastic_flags elastic;
  /// Elastic mode: --min-np or --host-discovery-script given.
  bool is_elastic() const {
    return elastic.min_np || !elastic.discovery_script.empty();
  }
};

/// Either options to run with, or an exit code to return at once (after
/// --help, or after a usage error that has been printed to stderr).
struct parse_result {
  std::optional<launch_options> options;
  int exit_code = 0;
};

parse_result parse_options(int argc, char** argv);

/// `text` as a whole number of at most 9 digits (horovodrun's *_mb values);
/// none when it is not one.
std::optional<int64_t> whole_number(const std::string& text);

} // namespace troupe::elastic::launcher
