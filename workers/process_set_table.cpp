#include "workers/process_set_table.hpp"

#include <algorithm>
#include <numeric>

namespace troupe::workers {

process_set_table::process_set_table(int world_size) : world_size_(world_size) {
  std::vector<int> all(static_cast<size_t>(world_size));
  std::iota(all.begin(), all.end(), 0);
  sets_.emplace(0, std::move(all));
}

status process_set_table::validate(const std::vector<int>& ranks) const {
  if (ranks.empty())
    return {status_code::invalid_argument, "Tried to register an empty process set."};
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= world_size_)
      return {status_code::invalid_argument,
              "Tried to register process set with invalid rank: " + std::to_string(sorted[i])};
    if (i > 0 && sorted[i] == sorted[i - 1])
      return {status_code::invalid_argument,
              "Tried to register process set with duplicate rank: " +
                std::to_string(sorted[i])};
  }
  for (const auto& [id, members] : sets_)
    if (members == sorted)
      return {status_code::invalid_argument,
              "A process set with ranks " + ranks_text(sorted) + " is already registered (id " +
                std::to_string(id) + ")."};
  return {};
}

int32_t process_set_table::add(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  int32_t id = next_id_;
  if (!free_ids_.empty()) {
    id = free_ids_.front();
    free_ids_.pop_front();
  } else {
    ++next_id_;
  }
  sets_.emplace(id, std::move(ranks));
  return id;
}

bool process_set_table::remove(int32_t id) {
  if (id == 0 || sets_.erase(id) == 0)
    return false;
  free_ids_.push_back(id);
  return true;
}

const std::vector<int>* process_set_table::ranks(int32_t id) const {
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : &it->second;
}

std::vector<int32_t> process_set_table::ids() const {
  std::vector<int32_t> out;
  for (const auto& kv : sets_)
    out.push_back(kv.first);
  return out;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (auto r : ranks)
    out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "[" + out + "]";
}

} // namespace troupe::workers
