#include "autotune/median.hpp"

#include <algorithm>
#include <cstddef>

namespace troupe::autotune {

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (values.size() % 2 == 1)
    return *mid;
  return (*mid + *std::max_element(values.begin(), mid)) / 2;
}

} // namespace troupe::autotune
