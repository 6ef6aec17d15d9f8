#include "autotune/step_detector.hpp"

#include <functional>

namespace troupe::autotune {

void step_detector::add_name(std::string_view name) {
  const size_t h = std::hash<std::string_view>{}(name);
  list_.push_back(h);
  repeat_ = repeat_ || step_.count(h) > 0;
}

bool step_detector::end_list() {
  const bool began = repeat_;
  if (began)
    step_.clear();
  step_.insert(list_.begin(), list_.end());
  list_.clear();
  repeat_ = false;
  return began;
}

} // namespace troupe::autotune
