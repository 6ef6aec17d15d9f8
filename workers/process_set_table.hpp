#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "troupe/status.hpp"

namespace troupe::workers {

/// The process sets this rank knows, identical on every rank because every
/// rank registers and removes sets in the same order (Horovod's contract).
/// Id 0 is the global set; a new set takes the oldest freed id, else the
/// next unused one. Pure bookkeeping: the runtime agrees on changes with
/// the other ranks and starts or stops the sets' actors.
class process_set_table {
public:
  explicit process_set_table(int world_size);

  /// Checks a rank list for registration: ranks in [0, world size), no
  /// duplicates, not empty, not already registered. Horovod's texts.
  status validate(const std::vector<int>& ranks) const;

  /// Registers sorted `ranks` (validated) and returns the new id.
  int32_t add(std::vector<int> ranks);

  /// Forgets set `id`; its id becomes reusable. False for 0 or unknown ids.
  bool remove(int32_t id);

  /// The global ranks of set `id`, ascending; null when unknown.
  const std::vector<int>* ranks(int32_t id) const;

  /// Ids of the registered sets, ascending (0 included).
  std::vector<int32_t> ids() const;

private:
  std::map<int32_t, std::vector<int>> sets_;
  std::deque<int32_t> free_ids_;
  int32_t next_id_ = 1;
  int world_size_;
};

/// "[0, 2]" — how Horovod prints rank lists.
std::string ranks_text(const std::vector<int>& ranks);

} // namespace troupe::workers
