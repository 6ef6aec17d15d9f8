#pragma once

#include <vector>

namespace troupe::autotune {

/// The median of `values` (the mean of the middle two for an even count);
/// 0 for none. The tuner scores by medians so that a burst of load on a
/// shared host, which slows a few steps or samples, does not move a score.
double median(std::vector<double> values);

} // namespace troupe::autotune
