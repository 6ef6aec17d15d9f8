#include "actors/submission_inbox.hpp"

#include <utility>

namespace troupe::actors {

namespace {

void fail(const entry_batch& batch) {
  for (const auto& e : batch)
    e->handle->complete(not_accepted());
}

} // namespace

submission_inbox::put_result submission_inbox::put(entry_batch batch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_) {
      queued_.push_back(std::move(batch));
      return std::exchange(signalled_, true) ? put_result::queued : put_result::signal;
    }
  }
  fail(batch);
  return put_result::closed;
}

void submission_inbox::take(std::vector<entry_batch>& into) {
  std::lock_guard<std::mutex> lock(mutex_);
  into.swap(queued_);
  signalled_ = false;
}

void submission_inbox::close() {
  std::vector<entry_batch> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    left.swap(queued_);
  }
  for (const auto& batch : left)
    fail(batch);
}

} // namespace troupe::actors
