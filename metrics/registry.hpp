#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "metrics/family.hpp"

namespace troupe::metrics {

/// The families of one process (or one runtime instance): registration
/// checks Prometheus' naming rules, exposition writes them in registration
/// order. Thread-safe; nothing global: whoever needs metrics owns one.
class registry {
public:
  /// Counter names must end in `_total` (the 0.0.4 family name includes it).
  /// Every add throws std::invalid_argument for a malformed or reserved name
  /// or label, or a name another family already produces.
  counter_family& add_counter(std::string name, std::string help,
                              std::vector<std::string> labels = {});
  gauge_family& add_gauge(std::string name, std::string help,
                          std::vector<std::string> labels = {});
  histogram_family& add_histogram(std::string name, std::string help,
                                  std::vector<std::string> labels, std::vector<double> bounds);

  /// Text exposition format 0.0.4 of every family.
  std::string expose() const;

private:
  template <class Family>
  Family& add(std::unique_ptr<Family> f);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<family_base>> families_;
};

} // namespace troupe::metrics
