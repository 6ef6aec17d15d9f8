#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/family.h>
#include <prometheus/labels.h>
#include <prometheus/registry.h>

namespace troupe::metrics {

/// The children one process set added to shared families, each labelled
/// `process_set`; they leave the exposition when the last set_series that
/// holds them goes. A set id reused while the removed set's actors still
/// wind down resolves to the same children (Family::Add returns them), so
/// they are counted per child, not per set.
class set_series {
public:
  /// Shared by every set_series of one registry (and keeps it alive).
  struct book {
    explicit book(std::shared_ptr<prometheus::Registry> r) : registry(std::move(r)) {
    }
    std::shared_ptr<prometheus::Registry> registry;
    std::mutex mutex;  // orders adds and removals of every set: never a hot path
    std::map<const void*, int> holders;
  };

  set_series(std::shared_ptr<book> b, uint32_t set_id)
    : book_(std::move(b)), set_label_(std::to_string(set_id)) {
  }
  ~set_series();

  set_series(const set_series&) = delete;
  set_series& operator=(const set_series&) = delete;

  /// The child of `family` for `labels` plus this set's label.
  template <class T, class... Args>
  T& add(prometheus::Family<T>& family, prometheus::Labels labels, Args&&... args) {
    labels.emplace("process_set", set_label_);
    std::lock_guard<std::mutex> lock{book_->mutex};
    auto& child = family.Add(labels, std::forward<Args>(args)...);
    ++book_->holders[&child];
    added_.push_back({&child, [&family, &child] { family.Remove(&child); }});
    return child;
  }

private:
  struct added {
    const void* child;
    std::function<void()> remove;
  };

  std::shared_ptr<book> book_;
  std::string set_label_;
  std::vector<added> added_;
};

} // namespace troupe::metrics
