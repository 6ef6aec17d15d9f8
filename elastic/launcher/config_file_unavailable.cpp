#include "elastic/launcher/config_file.hpp"

namespace troupe::elastic::launcher {

config_file read_config_file(const std::string& path) {
  throw config_file_error(path + ": this troupe-run was built without yaml-cpp "
                                 "(libyaml-cpp-dev), so it cannot read YAML");
}

} // namespace troupe::elastic::launcher
