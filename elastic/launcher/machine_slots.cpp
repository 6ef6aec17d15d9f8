#include "elastic/launcher/machine_slots.hpp"

#include <set>

namespace troupe::elastic::launcher {

int machine_slots::claim(int64_t worker, const std::string& machine) {
  std::set<int> taken;
  for (const auto& [id, where] : held_)
    if (where.first == machine)
      taken.insert(where.second);
  int index = 0;
  while (taken.count(index) > 0)
    ++index;
  held_[worker] = {machine, index};
  return index;
}

} // namespace troupe::elastic::launcher
