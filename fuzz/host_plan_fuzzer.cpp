// libFuzzer target: troupe-run's host parsers (elastic/launcher/host_plan.*).
// The input is a -H list and, the same text, a hostfile; the first byte
// picks the number of ranks to place on what they describe. Bad input must
// end in plan_error naming what is wrong, never in a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "elastic/launcher/host_plan.hpp"

namespace launcher = troupe::elastic::launcher;

namespace {

void place(const std::vector<launcher::host_spec>& hosts, int np) {
  auto ranks = launcher::plan_ranks(hosts, np);
  launcher::number_local_ranks_on_this_machine(ranks, "box.example.com");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const int np = data[0];
  const std::string text{reinterpret_cast<const char*>(data) + 1, size - 1};
  try {
    place(launcher::parse_host_list(text), np);
  } catch (const launcher::plan_error&) {
    // reported to the user as a usage error
  }
  try {
    std::istringstream file{text};
    place(launcher::parse_hostfile(file, "hostfile"), np);
  } catch (const launcher::plan_error&) {
  }
  launcher::is_local_host(text, "box.example.com");
  return 0;
}
