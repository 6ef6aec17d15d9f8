#pragma once

#include <string>

#include "elastic/launcher/line_forwarder.hpp"

namespace troupe::elastic::launcher {

/// horovodrun's --output-filename DIR (Gloo mode): every rank's tagged
/// output lines also go to DIR/rank.<rank>/stdout and .../stderr, the rank
/// zero-padded to the width of the largest one (rank.07 of 12), files
/// truncated at the start; an empty DIR writes none. The constructor
/// creates DIR; both throw std::runtime_error naming a directory or file
/// they cannot create.
class output_files {
public:
  output_files(std::string dir, int size);

  /// A sink that passes each line to `console` and appends it to `rank`'s
  /// file of `stream` ("stdout" or "stderr"); `console` itself without a
  /// folder.
  line_forwarder::sink tee(int rank, const std::string& stream,
                           line_forwarder::sink console) const;

private:
  std::string dir_;
  int width_;
};

} // namespace troupe::elastic::launcher
