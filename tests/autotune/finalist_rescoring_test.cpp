#include "autotune/finalist_rescoring.hpp"

#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace troupe::autotune {
namespace {

const settings a{1 << 20, 0.0, true};
const settings b{4 << 20, 0.0, true};
const settings c{64 << 10, 1.0, false};
const settings initial{128 << 20, 0.0, true};

TEST(FinalistRescoring, ChoosesTheBestScoredByTheirMedianAndTheConfiguredSettingLast) {
  // b scored twice (median 55); the configured setting's high score does
  // not take a place among the others.
  const std::vector<scored_setting> history{
    {initial, 500}, {a, 60}, {b, 90}, {c, 10}, {b, 20}, {a, 70}};
  auto finalists = choose_finalists(history, initial, 2);
  EXPECT_EQ(finalists, (std::vector<settings>{a, b, initial}));
  finalists = choose_finalists(history, initial, 5);
  EXPECT_EQ(finalists, (std::vector<settings>{a, b, c, initial}));
  EXPECT_EQ(choose_finalists({}, initial, 3), std::vector<settings>{initial});
}

TEST(FinalistRescoring, LoadThatLastsARoundCancels) {
  // a is truly 5 % faster than b; every round runs at another load (other
  // jobs on the host). Relative to their rounds, the scores keep the true
  // ratio exactly, in bytes per second at the rounds' median load.
  finalist_rescoring r({a, b}, 4);
  const double load[] = {1.0, 0.33, 0.7, 0.5};
  for (int round = 0; round < 4; ++round)
    for (int i = 0; i < 2; ++i) {
      const double speed = r.current() == a ? 100 : 95;
      EXPECT_EQ(r.record(speed * load[round]), round == 3 && i == 1);
    }
  ASSERT_TRUE(r.finished());
  ASSERT_EQ(r.scored().size(), 2u);
  EXPECT_EQ(r.scored()[0].setting, a);
  EXPECT_EQ(r.scored()[1].setting, b);
  EXPECT_EQ(r.winner().setting, a);
  EXPECT_NEAR(r.scored()[0].score / r.scored()[1].score, 100.0 / 95, 1e-9);
  EXPECT_NEAR(r.margin(), 0, 1e-12);  // no scatter left: any gain counts
  // The median of all 8 samples (50 and 66.5) times a's share of a round.
  EXPECT_NEAR(r.scored()[0].score, 58.25 * 100 / 97.5, 1e-9);
  EXPECT_FALSE(r.record(1000));  // finished: nothing changes
  EXPECT_EQ(r.winner().setting, a);
}

TEST(FinalistRescoring, EachRoundStartsOneFinalistLater) {
  finalist_rescoring r({a, b, c}, 3);
  std::vector<settings> ran;
  while (!r.finished()) {
    ran.push_back(r.current());
    r.record(1);
  }
  EXPECT_EQ(ran, (std::vector<settings>{a, b, c, b, c, a, c, a, b}));
  EXPECT_EQ(r.winner().setting, c);  // equal scores: the incumbent (last) stays
}

// Rescoring `challenger` (truly `gain` times as fast) against `initial`
// over 5 rounds whose samples scatter by +-5-6 %, in opposite directions
// for the two.
finalist_rescoring rescore_with_noise(double gain) {
  finalist_rescoring r({a, initial}, 5);
  const double noise[] = {1.05, 0.95, 1.0, 1.06, 0.94};
  for (int k = 0; k < 10; ++k) {
    const int round = k / 2;
    const bool challenger = r.current() == a;
    const double jitter = challenger ? noise[round] : 2 - noise[round];
    r.record((challenger ? 100 * gain : 100) * jitter);
  }
  return r;
}

TEST(FinalistRescoring, AGainWithinTheNoiseKeepsTheIncumbent) {
  // 3 % faster, but with this scatter the medians of 5 rounds cannot tell:
  // the margin is twice their difference's standard error.
  auto r = rescore_with_noise(1.03);
  ASSERT_TRUE(r.finished());
  EXPECT_GT(r.scored()[0].score, r.scored()[1].score);
  EXPECT_GT(r.margin(), 0.05);
  EXPECT_LT(r.margin(), 0.2);
  EXPECT_EQ(r.winner().setting, initial);
}

TEST(FinalistRescoring, AGainBeyondTheNoiseReplacesTheIncumbent) {
  auto r = rescore_with_noise(1.3);
  ASSERT_TRUE(r.finished());
  EXPECT_GT(r.scored()[0].score, r.scored()[1].score * (1 + r.margin()));
  EXPECT_EQ(r.winner().setting, a);
}

TEST(FinalistRescoring, RefusesNoFinalistsOrNoRounds) {
  EXPECT_THROW(finalist_rescoring({}, 3), std::invalid_argument);
  EXPECT_THROW(finalist_rescoring({a}, 0), std::invalid_argument);
}

} // namespace
} // namespace troupe::autotune
