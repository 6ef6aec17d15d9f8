#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace troupe::elastic::launcher {

/// Re-emits one worker stream line by line, each line prefixed the way
/// horovodrun does it: "[<rank>]<stdout>:" or "[<rank>]<stderr>:". Lines of
/// different ranks then interleave whole, never mid-line.
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
