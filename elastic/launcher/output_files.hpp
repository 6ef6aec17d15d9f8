#pragma once

#include <string>

#include "elastic/launcher/line_forwarder.hpp"

namespace troupe::elastic::launcher {

/// What troupe-run does with each rank's tagged output lines beyond
/// printing them. horovodrun's --output-filename DIR (Gloo mode): they also
/// go to DIR/rank.<rank>/stdout and .../stderr, the rank zero-padded to the
/// width of the largest one (rank.07 of 12), files truncated at the start;
/// an empty DIR writes none. horovodrun's --prefix-output-with-timestamp:
/// each line starts with the local time as Python's time.asctime() writes
/// it ("Fri Nov 27 14:10:26 2026[0]<stdout>:..."), in the files too. The
/// constructor creates DIR; both throw std::runtime_error naming a
/// directory or file they cannot create.
class output_files {
public:
  output_files(std::string dir, int size, bool timestamps);

  /// A sink that passes each line to `console` and appends it to `rank`'s
  /// file of `stream` ("stdout" or "stderr"); `console` itself without a
  /// folder.
  line_forwarder::sink tee(int rank, const std::string& stream,
                           line_forwarder::sink console) const;

private:
  line_forwarder::sink to_file(int rank, const std::string& stream,
                               line_forwarder::sink console) const;

  std::string dir_;
  int width_;
  bool timestamps_;
};

} // namespace troupe::elastic::launcher
