#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::control {

/// Which members have asked for each cached tensor, in shared memory: one
/// word per cache id, `list << 32 | mask`, where `list` is the response
/// list that last named the id on the poster's side (the version of the
/// cache entry every member resolves the id against) and `mask` has bit m
/// set once set rank m asked for it. The member whose bit completes the
/// mask empties it and owes every member an agreed list naming the id
/// (see docs/architecture.md, "Agreement without the coordinator").
/// A view: the words belong to the control channel's segment.
class arrival_board {
public:
  /// The most members a mask holds.
  static constexpr int max_members = 32;

  enum class outcome {
    posted,     // the bit is set; another member completes the mask
    completed,  // this bit completed it: the caller writes the agreed list
    behind,     // the word is of a later version than the caller's: a list
                // the caller has not applied yet changed the id
    no_slot,    // an id outside the board
  };

  arrival_board(std::atomic<uint64_t>* words, size_t count, int members);

  /// Sets `member`'s bit for cache id `id` as of list `list`. Bits of an
  /// earlier version of the id are stale (their members will ask again
  /// once they apply the list that changed it) and are replaced.
  outcome post(uint32_t id, uint64_t list, int member);

  /// The words' current values (for the stall inspector): index = id.
  std::vector<uint64_t> snapshot() const;


private:
  std::atomic<uint64_t>* words_;
  size_t count_;
  int members_;
  uint32_t full_;
};

} // namespace troupe::control
