#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::control {

/// Which members have asked for each cached tensor, in shared memory: one
/// word per cache id, `version << 32 | mask`, where `version` stands for
/// the response list that last named the id on the poster's side (the
/// version of the cache entry every member resolves the id against,
/// version_of()) and `mask` has bit m
/// set once set rank m asked for it. The member whose bit completes the
/// mask empties it and owes every member an agreed list naming the id
/// (see docs/architecture.md, "Agreement without the coordinator").
/// Next to the words, one flag per id says that a mask was completed since
/// the coordinator last asked (take_agreed): hits agreed here never reach
/// its LRU order, which asks before it evicts.
/// A view: the words belong to the control channel's segment.
class arrival_board {
public:
  /// The most members a mask holds.
  static constexpr int max_members = 32;
  /// Segment bytes per cache id: its word and its flag.
  static constexpr size_t bytes_per_id = 16;

  enum class outcome {
    posted,     // the bit is set; another member completes the mask
    completed,  // this bit completed it: the caller writes the agreed list
    behind,     // the word is of a later version than the caller's: a list
                // the caller has not applied yet changed the id
    no_slot,    // an id outside the board
  };

  /// The version a word holds for response list `list`: never 0 (a word
  /// nobody posted to), and list numbers modulo 2^32 - 1 past that, which
  /// post() compares as a window so that they keep their order across the
  /// wrap.
  static constexpr uint32_t version_of(uint64_t list) {
    return static_cast<uint32_t>(list % 0xffff'ffffu) + 1;
  }

  /// `words` holds 2 x `count` words: the masks, then the flags.
  arrival_board(std::atomic<uint64_t>* words, size_t count, int members);

  /// Sets `member`'s bit for cache id `id` as of list `list`. Bits of an
  /// earlier version of the id are stale (their members will ask again
  /// once they apply the list that changed it) and are replaced.
  outcome post(uint32_t id, uint64_t list, int member);

  /// Clears `member`'s bit for `id` if the word still holds it as of
  /// `list`: a post its member no longer stands by (it asks the coordinator
  /// instead) must not complete a later round of the same version without
  /// it.
  void withdraw(uint32_t id, uint64_t list, int member);

  /// For the member that completed `id`'s mask as of `list` and will not
  /// write the agreed list (it failed here): puts the other members' bits
  /// back, unless a later round or version began meanwhile, so that the
  /// stall inspector sees them wait (an emptied mask looks agreed).
  void reopen(uint32_t id, uint64_t list, int member);

  /// The words' current values (for the stall inspector): index = id - 1.
  std::vector<uint64_t> snapshot() const;

  /// Whether a mask of `id` was completed since the last call for it
  /// (clears the flag). An id reused for another tensor may carry its
  /// predecessor's flag once.
  bool take_agreed(uint32_t id);

private:
  // The word of `id` where `member` may post to it; null outside the board.
  std::atomic<uint64_t>* word_of(uint32_t id, int member) const;

  std::atomic<uint64_t>* words_;
  std::atomic<uint64_t>* agreed_;
  size_t count_;
  int members_;
  uint32_t full_;
};

} // namespace troupe::control
