#include "coordinator/response_cache.hpp"

#include <algorithm>

#include "control/arrival_board.hpp"
#include "proto/request_parameters.hpp"

namespace troupe::coordinator {

namespace {

bool same_requests(const response_cache::requests& a, const response_cache::requests& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return !x == !y && (x == y || same_parameters(*x, *y));
  });
}

} // namespace

response_cache::response_cache(size_t capacity, int32_t set_size)
  : capacity_(capacity), applied_(static_cast<size_t>(set_size), 0) {
}

uint32_t response_cache::put(const std::string& name, requests by_rank,
                             uint64_t list_seq) {
  // A tensor some member never sent (it joined) has no hit to offer.
  if (!enabled() || std::any_of(by_rank.begin(), by_rank.end(),
                                [](const auto& r) { return !r; }))
    return 0;
  uint32_t id = 0;
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    auto pos = it->second;
    if (same_requests(pos->tensor->by_rank, by_rank)) {
      lru_.splice(lru_.begin(), lru_, pos);
      pos->named = list_seq;
      return pos->id;
    }
    // New parameters under the same id: members that have not seen this
    // list yet still resolve the id to the old requests.
    id = pos->id;
    retire(pos, list_seq, true);
  } else if (by_name_.size() >= capacity_) {
    evicted_ = true;
    retire(victim(), list_seq, false);
  }
  if (id == 0) {
    if (!free_ids_.empty()) {
      id = free_ids_.back();
      free_ids_.pop_back();
    } else {
      id = next_id_++;
    }
  }
  lru_.push_front(entry{std::make_shared<const cached_tensor>(cached_tensor{name, std::move(by_rank)}), id,
                        list_seq, UINT64_MAX, list_seq});
  by_name_[name] = lru_.begin();
  by_id_[id] = lru_.begin();
  return id;
}

uint32_t response_cache::touch(const cached_tensor_ptr& tensor, uint64_t list_seq) {
  if (!enabled())
    return 0;
  if (auto it = by_name_.find(tensor->name); it != by_name_.end() && it->second->tensor == tensor) {
    lru_.splice(lru_.begin(), lru_, it->second);
    it->second->named = list_seq;
    return it->second->id;
  }
  return put(tensor->name, tensor->by_rank, list_seq);
}

cached_tensor_ptr response_cache::named_in(uint32_t id, uint32_t list_version) const {
  auto it = by_id_.find(id);
  if (it == by_id_.end() ||
      control::arrival_board::version_of(it->second->named) != list_version)
    return nullptr;
  return it->second->tensor;
}

cached_tensor_ptr response_cache::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second->tensor;
}

void response_cache::erase(const std::string& name, uint64_t list_seq) {
  if (auto it = by_name_.find(name); it != by_name_.end())
    retire(it->second, list_seq, false);
}

std::list<response_cache::entry>::iterator response_cache::victim() {
  // The flags asked are cleared: after one round at most, the oldest is
  // taken. (Its `named` stays: members resolve ids by the list that last
  // wrote them.)
  for (size_t asked = 0; used_elsewhere_ && asked < lru_.size(); ++asked) {
    auto last = std::prev(lru_.end());
    if (!used_elsewhere_(last->id))
      return last;
    lru_.splice(lru_.begin(), lru_, last);
  }
  return std::prev(lru_.end());
}

void response_cache::retire(std::list<entry>::iterator it, uint64_t list_seq, bool keep_id) {
  by_name_.erase(it->tensor->name);
  by_id_.erase(it->id);
  if (!keep_id)
    free_ids_.push_back(it->id);
  it->valid_until = list_seq;
  if (it->valid_until > it->valid_from)  // else no state ever contained it
    retired_.push_back(std::move(*it));
  lru_.erase(it);
}

cached_tensor_ptr response_cache::resolve(uint32_t id, int32_t rank,
                                          uint64_t lists_applied) const {
  if (rank < 0 || static_cast<size_t>(rank) >= applied_.size())
    return nullptr;
  if (auto it = by_id_.find(id); it != by_id_.end() && it->second->valid_from <= lists_applied)
    return it->second->tensor;
  for (const auto& e : retired_)
    if (e.id == id && e.valid_from <= lists_applied && lists_applied < e.valid_until)
      return e.tensor;
  return nullptr;
}

void response_cache::member_progress(int64_t first, int64_t end, uint64_t lists_applied) {
  if (first < 0 || end <= first || static_cast<size_t>(end) > applied_.size())
    return;
  for (auto r = static_cast<size_t>(first); r < static_cast<size_t>(end); ++r)
    applied_[r] = std::max(applied_[r], lists_applied);
  if (retired_.empty())
    return;
  const auto oldest = *std::min_element(applied_.begin(), applied_.end());
  retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                [&](const entry& e) { return e.valid_until <= oldest; }),
                 retired_.end());
}

void response_cache::reset(size_t capacity, uint64_t list_seq) {
  while (!lru_.empty())
    retire(lru_.begin(), list_seq, false);
  capacity_ = capacity;
}

bool response_cache::take_first_eviction() {
  if (!evicted_ || eviction_reported_)
    return false;
  eviction_reported_ = true;
  return true;
}

} // namespace troupe::coordinator
