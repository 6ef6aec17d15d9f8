#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace troupe::elastic::launcher {

/// The "rank" of a worker that is mpirun itself (troupe-run --mpi with a
/// metrics endpoint): it runs every rank and tags their lines.
constexpr int mpirun_rank = -1;

/// Re-emits one worker stream line by line, each line prefixed the way
/// horovodrun does it: "[<rank>]<stdout>:" or "[<rank>]<stderr>:". Lines of
/// different ranks then interleave whole, never mid-line. mpirun's lines
/// (rank mpirun_rank) keep the tags mpirun gave them.
class line_forwarder {
public:
  /// Receives complete tagged lines, newline included.
  using sink = std::function<void(std::string_view)>;

  line_forwarder(int rank, std::string_view stream, sink out);

  /// Feeds bytes as they come from the pipe.
  void feed(std::string_view data);

  /// At EOF: emits a last line that lacked its newline.
  void finish();

private:
  void emit(std::string_view line);

  std::string prefix_;
  std::string pending_;
  sink out_;
};

} // namespace troupe::elastic::launcher
