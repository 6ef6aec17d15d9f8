#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "metrics/text_format.hpp"

namespace troupe::metrics {

/// What every family has: a name, help, a type and fixed label names.
class family_base {
public:
  family_base(std::string name, std::string help, const char* type,
              std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), type_(type),
      label_names_(std::move(label_names)) {
  }
  virtual ~family_base() = default;

  const std::string& name() const {
    return name_;
  }
  const char* type() const {
    return type_;
  }

  /// HELP and TYPE once, then every child's samples (in label order).
  void write(std::string& out) const {
    text::append_header(out, name_, help_, type_);
    std::lock_guard<std::mutex> lock{mutex_};
    write_samples(out);
  }

protected:
  virtual void write_samples(std::string& out) const = 0;

  std::string name_;
  std::string help_;
  const char* type_;
  std::vector<std::string> label_names_;
  mutable std::mutex mutex_;  // guards the children, never a hot path
};

/// One metric per combination of label values. Children are created at
/// registration (with()) and live as long as the family, so callers keep a
/// reference and update it without a lookup, lock or allocation.
template <class Metric>
class family : public family_base {
public:
  using factory = std::function<std::unique_ptr<Metric>()>;

  family(std::string name, std::string help, const char* type,
         std::vector<std::string> label_names, factory make)
    : family_base(std::move(name), std::move(help), type, std::move(label_names)),
      make_(std::move(make)) {
  }

  /// The child for these label values (one per label name), created on
  /// first use. Throws std::invalid_argument on a wrong number of values.
  Metric& with(std::vector<std::string> values = {}) {
    if (values.size() != label_names_.size())
      throw std::invalid_argument("metric " + name_ + " takes " +
                                  std::to_string(label_names_.size()) + " label values");
    std::lock_guard<std::mutex> lock{mutex_};
    auto& child = children_[std::move(values)];
    if (!child)
      child = make_();
    return *child;
  }

private:
  void write_samples(std::string& out) const override {
    for (const auto& [values, child] : children_)
      text::append_samples(out, name_, label_names_, values, *child);
  }

  factory make_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

using counter_family = family<counter>;
using gauge_family = family<gauge>;
using histogram_family = family<histogram>;

} // namespace troupe::metrics
