#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "control/arrival_board.hpp"

namespace troupe::control {
namespace {

using outcome = arrival_board::outcome;

TEST(arrival_board, the_last_member_to_post_completes_the_mask_and_empties_it) {
  std::vector<std::atomic<uint64_t>> words(2 * 4);  // masks, then flags
  arrival_board board(words.data(), 4, 3);
  EXPECT_EQ(board.post(2, 7, 0), outcome::posted);
  EXPECT_EQ(board.post(2, 7, 2), outcome::posted);
  EXPECT_EQ(board.post(3, 7, 1), outcome::posted);  // another id: its own word
  EXPECT_EQ(board.post(2, 7, 1), outcome::completed);
  EXPECT_EQ(words[1].load(), uint64_t{arrival_board::version_of(7)} << 32);
  // The next round of the same version starts from an empty mask.
  EXPECT_EQ(board.post(2, 7, 1), outcome::posted);
  EXPECT_EQ(board.post(2, 7, 0), outcome::posted);
  EXPECT_EQ(board.post(2, 7, 2), outcome::completed);
}

TEST(arrival_board, bits_of_an_older_version_are_replaced_and_an_older_poster_is_behind) {
  std::vector<std::atomic<uint64_t>> words(2 * 2);  // masks, then flags
  arrival_board board(words.data(), 2, 2);
  EXPECT_EQ(board.post(1, 5, 0), outcome::posted);
  // Member 1 applied list 9, which named id 1 anew: member 0's bit was for
  // what id 1 named before, and does not count.
  EXPECT_EQ(board.post(1, 9, 1), outcome::posted);
  EXPECT_EQ(words[0].load(), (uint64_t{arrival_board::version_of(9)} << 32) | 2);
  EXPECT_EQ(board.post(1, 5, 0), outcome::behind);
  EXPECT_EQ(board.post(1, 9, 0), outcome::completed);
}

TEST(arrival_board, versions_keep_their_order_across_the_wrap_of_32_bits) {
  std::vector<std::atomic<uint64_t>> words(2 * 1);  // masks, then flags
  arrival_board board(words.data(), 1, 2);
  const uint64_t old_list = 0xffff'fffd;  // the last before the wrap
  const uint64_t new_list = old_list + 5;
  ASSERT_LT(arrival_board::version_of(new_list), arrival_board::version_of(old_list));
  EXPECT_NE(arrival_board::version_of(0xffff'fffe), 0u);  // 0: a word nobody posted to
  EXPECT_EQ(board.post(1, old_list, 0), outcome::posted);
  EXPECT_EQ(board.post(1, new_list, 1), outcome::posted);  // replaces the old bit
  EXPECT_EQ(board.post(1, old_list, 0), outcome::behind);
  EXPECT_EQ(board.post(1, new_list, 0), outcome::completed);
}

TEST(arrival_board, a_withdrawn_bit_no_longer_counts) {
  std::vector<std::atomic<uint64_t>> words(2 * 1);  // masks, then flags
  arrival_board board(words.data(), 1, 3);
  EXPECT_EQ(board.post(1, 6, 0), outcome::posted);
  EXPECT_EQ(board.post(1, 6, 1), outcome::posted);
  board.withdraw(1, 6, 0);
  EXPECT_EQ(words[0].load(), (uint64_t{arrival_board::version_of(6)} << 32) | 2);
  EXPECT_EQ(board.post(1, 6, 2), outcome::posted);  // member 0 is missing again
  EXPECT_EQ(board.post(1, 6, 0), outcome::completed);
  // Nothing to withdraw from a completed mask, another version, another
  // member's bit, or outside the board.
  board.withdraw(1, 6, 0);
  EXPECT_EQ(board.post(1, 6, 1), outcome::posted);
  board.withdraw(1, 5, 1);
  board.withdraw(1, 6, 2);
  board.withdraw(2, 6, 1);
  board.withdraw(1, 6, 3);
  EXPECT_EQ(words[0].load(), (uint64_t{arrival_board::version_of(6)} << 32) | 2);
}

TEST(arrival_board, a_mask_reopened_by_its_completer_shows_the_others_waiting) {
  std::vector<std::atomic<uint64_t>> words(2 * 2);  // masks, then flags
  arrival_board board(words.data(), 2, 3);
  const auto word = [&](uint32_t mask) {
    return (uint64_t{arrival_board::version_of(8)} << 32) | mask;
  };
  EXPECT_EQ(board.post(1, 8, 0), outcome::posted);
  EXPECT_EQ(board.post(1, 8, 2), outcome::posted);
  EXPECT_EQ(board.post(1, 8, 1), outcome::completed);
  board.reopen(1, 8, 1);
  EXPECT_EQ(words[0].load(), word(0b101));
  board.reopen(1, 8, 1);  // not emptied (any more): left alone
  EXPECT_EQ(words[0].load(), word(0b101));
  // Nor a round that began since, or another version.
  EXPECT_EQ(board.post(2, 8, 0), outcome::posted);
  board.reopen(2, 8, 1);
  board.reopen(2, 9, 1);
  EXPECT_EQ(words[1].load(), word(0b001));
}

TEST(arrival_board, a_completed_mask_flags_its_id_until_taken) {
  std::vector<std::atomic<uint64_t>> words(2 * 2);  // masks, then flags
  arrival_board board(words.data(), 2, 2);
  EXPECT_FALSE(board.take_agreed(1));
  EXPECT_EQ(board.post(1, 4, 0), outcome::posted);
  EXPECT_FALSE(board.take_agreed(1));  // posted, not agreed
  EXPECT_EQ(board.post(1, 4, 1), outcome::completed);
  EXPECT_FALSE(board.take_agreed(2));
  EXPECT_TRUE(board.take_agreed(1));
  EXPECT_FALSE(board.take_agreed(1));  // taken
  EXPECT_FALSE(board.take_agreed(0));
  EXPECT_FALSE(board.take_agreed(3));
}

TEST(arrival_board, ids_and_members_outside_the_board_are_refused) {
  std::vector<std::atomic<uint64_t>> words(2 * 2);  // masks, then flags
  arrival_board board(words.data(), 2, 2);
  EXPECT_EQ(board.post(0, 1, 0), outcome::no_slot);
  EXPECT_EQ(board.post(3, 1, 0), outcome::no_slot);
  EXPECT_EQ(board.post(1, 1, 2), outcome::no_slot);
  EXPECT_EQ(board.post(1, 1, -1), outcome::no_slot);
}

TEST(arrival_board, a_full_set_of_32_members_completes) {
  std::vector<std::atomic<uint64_t>> words(2 * 1);  // masks, then flags
  arrival_board board(words.data(), 1, 32);
  for (int m = 0; m < 31; ++m)
    ASSERT_EQ(board.post(1, 1, m), outcome::posted) << m;
  EXPECT_EQ(board.post(1, 1, 31), outcome::completed);
}

// Members on threads post each round's arrival in any order; exactly one
// of them completes each round, and nobody posts the next round of an id
// before the round it is in completed (as a member cannot ask for a
// tensor again before it ran).
TEST(arrival_board, exactly_one_member_completes_each_round_under_contention) {
  constexpr int members = 4;
  constexpr int rounds = 20000;
  std::vector<std::atomic<uint64_t>> words(2 * 1);  // masks, then flags
  arrival_board board(words.data(), 1, members);
  std::atomic<int> completed{0};
  std::vector<int> completions(members, 0);
  std::vector<std::thread> threads;
  for (int m = 0; m < members; ++m)
    threads.emplace_back([&, m] {
      for (int r = 0; r < rounds; ++r) {
        if (board.post(1, 3, m) == outcome::completed) {
          ++completions[static_cast<size_t>(m)];
          completed.fetch_add(1);
        }
        while (completed.load() <= r)
          std::this_thread::yield();
      }
    });
  for (auto& t : threads)
    t.join();
  int total = 0;
  for (auto c : completions)
    total += c;
  EXPECT_EQ(total, rounds);
  EXPECT_EQ(completed.load(), rounds);
}

} // namespace
} // namespace troupe::control
