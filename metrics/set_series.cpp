#include "metrics/set_series.hpp"

namespace troupe::metrics {

set_series::~set_series() {
  std::lock_guard<std::mutex> lock{book_->mutex};
  for (const auto& a : added_) {
    auto it = book_->holders.find(a.child);
    if (--it->second == 0) {
      book_->holders.erase(it);
      a.remove();
    }
  }
}

} // namespace troupe::metrics
