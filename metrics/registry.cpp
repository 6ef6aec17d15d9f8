#include "metrics/registry.hpp"

#include <stdexcept>

namespace troupe::metrics {

namespace {

bool name_char(char ch, bool first, bool colon_ok) {
  const bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
  return alpha || (colon_ok && ch == ':') || (!first && ch >= '0' && ch <= '9');
}

bool valid_name(const std::string& s, bool colon_ok) {
  if (s.empty() || s.rfind("__", 0) == 0)
    return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (!name_char(s[i], i == 0, colon_ok))
      return false;
  return true;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Sample names a family writes: histograms add _bucket, _sum and _count.
std::vector<std::string> sample_names(const family_base& f) {
  if (std::string(f.type()) == "histogram")
    return {f.name(), f.name() + "_bucket", f.name() + "_sum", f.name() + "_count"};
  return {f.name()};
}

void check(const std::string& name, const std::vector<std::string>& labels) {
  // Colons are reserved for recording rules.
  if (!valid_name(name, false))
    throw std::invalid_argument("'" + name + "' is not a valid metric name");
  for (size_t i = 0; i < labels.size(); ++i) {
    if (!valid_name(labels[i], false) || labels[i] == "le" || labels[i] == "quantile")
      throw std::invalid_argument("metric " + name + ": '" + labels[i] +
                                  "' is not a valid or allowed label name");
    for (size_t j = 0; j < i; ++j)
      if (labels[j] == labels[i])
        throw std::invalid_argument("metric " + name + ": label '" + labels[i] + "' repeated");
  }
}

} // namespace

template <class Family>
Family& registry::add(std::unique_ptr<Family> f) {
  std::lock_guard<std::mutex> lock{mutex_};
  const auto mine = sample_names(*f);
  for (const auto& other : families_)
    for (const auto& theirs : sample_names(*other))
      for (const auto& n : mine)
        if (n == theirs)
          throw std::invalid_argument("metric name " + n + " is already registered");
  auto& out = *f;
  families_.push_back(std::move(f));
  return out;
}

counter_family& registry::add_counter(std::string name, std::string help,
                                      std::vector<std::string> labels) {
  check(name, labels);
  if (!ends_with(name, "_total"))
    throw std::invalid_argument("counter " + name + " must end in _total");
  return add(std::make_unique<counter_family>(std::move(name), std::move(help), "counter",
                                              std::move(labels),
                                              [] { return std::make_unique<counter>(); }));
}

gauge_family& registry::add_gauge(std::string name, std::string help,
                                  std::vector<std::string> labels) {
  check(name, labels);
  return add(std::make_unique<gauge_family>(std::move(name), std::move(help), "gauge",
                                            std::move(labels),
                                            [] { return std::make_unique<gauge>(); }));
}

histogram_family& registry::add_histogram(std::string name, std::string help,
                                          std::vector<std::string> labels,
                                          std::vector<double> bounds) {
  check(name, labels);
  histogram probe{bounds};  // rejects bad bounds at registration, not at first use
  return add(std::make_unique<histogram_family>(
    std::move(name), std::move(help), "histogram", std::move(labels),
    [bounds = std::move(bounds)] { return std::make_unique<histogram>(bounds); }));
}

std::string registry::expose() const {
  std::string out;
  std::lock_guard<std::mutex> lock{mutex_};
  for (const auto& f : families_)
    f->write(out);
  return out;
}

} // namespace troupe::metrics
