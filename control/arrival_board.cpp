#include "control/arrival_board.hpp"

namespace troupe::control {

arrival_board::arrival_board(std::atomic<uint64_t>* words, size_t count, int members)
    : words_(words),
      agreed_(words + count),
      count_(count),
      members_(members),
      full_(members >= max_members ? ~uint32_t{0} : (uint32_t{1} << members) - 1) {
}

std::atomic<uint64_t>* arrival_board::word_of(uint32_t id, int member) const {
  if (id == 0 || id > count_ || member < 0 || member >= members_ || member >= max_members)
    return nullptr;
  return &words_[id - 1];
}

arrival_board::outcome arrival_board::post(uint32_t id, uint64_t list, int member) {
  auto* at = word_of(id, member);
  if (!at)
    return outcome::no_slot;
  auto& word = *at;
  const auto version = version_of(list);
  const uint32_t bit = uint32_t{1} << member;
  uint64_t seen = word.load(std::memory_order_acquire);
  for (;;) {
    const auto seen_version = static_cast<uint32_t>(seen >> 32);
    const auto ahead = static_cast<int32_t>(seen_version - version);
    uint32_t mask = static_cast<uint32_t>(seen);
    if (seen_version != 0 && ahead > 0)  // (0: nobody posted yet)
      return outcome::behind;
    if (ahead != 0)
      mask = 0;
    mask |= bit;
    const bool complete = (mask & full_) == full_;
    const uint64_t next = uint64_t{version} << 32 | (complete ? 0 : mask);
    if (!word.compare_exchange_weak(seen, next, std::memory_order_acq_rel,
                                    std::memory_order_acquire))
      continue;
    if (!complete)
      return outcome::posted;
    // (Read first: a flag already set is not written again, so a hot id's
    // cache line is not bounced between the members for nothing.)
    auto& agreed = agreed_[id - 1];
    if (agreed.load(std::memory_order_relaxed) == 0)
      agreed.store(1, std::memory_order_relaxed);
    return outcome::completed;
  }
}

void arrival_board::withdraw(uint32_t id, uint64_t list, int member) {
  auto* at = word_of(id, member);
  if (!at)
    return;
  auto& word = *at;
  const auto version = version_of(list);
  const uint32_t bit = uint32_t{1} << member;
  uint64_t seen = word.load(std::memory_order_acquire);
  // Only this member's own bit of that version: a completed mask (empty)
  // or a later version is someone else's business.
  while (static_cast<uint32_t>(seen >> 32) == version && (seen & bit) != 0)
    if (word.compare_exchange_weak(seen, seen & ~uint64_t{bit}, std::memory_order_acq_rel,
                                   std::memory_order_acquire))
      return;
}

void arrival_board::reopen(uint32_t id, uint64_t list, int member) {
  auto* word = word_of(id, member);
  if (!word)
    return;
  uint64_t emptied = uint64_t{version_of(list)} << 32;
  word->compare_exchange_strong(emptied, emptied | (full_ & ~(uint32_t{1} << member)),
                                std::memory_order_acq_rel, std::memory_order_acquire);
}

bool arrival_board::take_agreed(uint32_t id) {
  if (id == 0 || id > count_)
    return false;
  auto& agreed = agreed_[id - 1];
  return agreed.load(std::memory_order_relaxed) != 0 &&
         agreed.exchange(0, std::memory_order_relaxed) != 0;
}

std::vector<uint64_t> arrival_board::snapshot() const {
  std::vector<uint64_t> out(count_);
  for (size_t i = 0; i < count_; ++i)
    out[i] = words_[i].load(std::memory_order_relaxed);
  return out;
}

} // namespace troupe::control
