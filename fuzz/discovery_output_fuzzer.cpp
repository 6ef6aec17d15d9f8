// libFuzzer target: the parser of --host-discovery-script's output
// (elastic/launcher/discovery.*), which troupe-run reads every second from a
// user's script. The first byte picks --slots-per-host (0: not given), the
// rest is the output. Bad output must end in plan_error naming the line;
// what is accepted must be hosts the launcher can place ranks on.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "elastic/launcher/discovery.hpp"

namespace launcher = troupe::elastic::launcher;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const std::optional<int> default_slots =
    data[0] == 0 ? std::nullopt : std::optional<int>(data[0]);
  const std::string text{reinterpret_cast<const char*>(data) + 1, size - 1};
  try {
    const auto hosts = launcher::parse_discovery_output(text, default_slots);
    std::set<std::string> names;
    for (const auto& h : hosts) {
      // A name with a blank or a control byte, a repeated host or a seat
      // count below one would reach the seat assignment.
      const bool blank_or_control = std::any_of(h.name.begin(), h.name.end(), [](unsigned char c) {
        return c <= 0x20 || c == 0x7f;
      });
      if (h.name.empty() || blank_or_control || h.slots < 1 || !names.insert(h.name).second)
        std::abort();
    }
  } catch (const launcher::plan_error&) {
    // reported as a failed discovery run
  }
  return 0;
}
