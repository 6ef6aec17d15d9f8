#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace troupe::elastic::launcher {

/// A --config-file that cannot be read or holds a value of the wrong kind;
/// the message names the file and the key.
class config_file_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What horovodrun's YAML config file (--config-file) sets, translated to
/// Troupe's knobs. Its sections and keys are horovodrun's: `params`,
/// `autotune`, `timeline`, `stall_check`, `library_options`, `logging`, and
/// `controller` (gloo or mpi).
struct config_file {
  /// (knob's TROUPE_* variable, value as the knob's flag would take it), in
  /// the file's order. Not yet checked against the knob.
  std::vector<std::pair<std::string, std::string>> knobs;
  /// "gloo", "mpi", or empty when the file does not say.
  std::string controller;
  /// "section.key" for each entry Troupe has no use for, with why; Horovod
  /// too skips keys it does not know, so these are warnings.
  std::vector<std::string> ignored;
};

/// Reads `path`. Throws config_file_error.
config_file read_config_file(const std::string& path);

} // namespace troupe::elastic::launcher
