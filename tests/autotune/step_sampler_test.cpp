#include "autotune/step_sampler.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autotune/step_detector.hpp"

namespace troupe::autotune {
namespace {

using std::chrono::microseconds;
using list = step_sampler::list;

// A simulated training job on one setting: every step the application works
// for `pause` (its forward pass, the optimiser), then submits `tensors`
// tensors of `bytes` each, which the setting sends in `lists` response lists
// of `per_list` microseconds each. Lists go through a step_detector, as in
// the coordinator, and their scores through a step_sampler, as in the tuner.
struct job {
  int tensors = 160;
  uint64_t bytes = 1 << 20;
  microseconds pause{10000};
  int lists = 1;
  microseconds per_list{0};
  uint64_t generation = 1;

  microseconds step_time() const {
    return pause + per_list * lists;
  }
  double true_throughput() const {  // bytes per second
    return static_cast<double>(bytes * static_cast<uint64_t>(tensors)) /
           std::chrono::duration<double>(step_time()).count();
  }

  // Runs `steps` steps from `t`; returns the scores of the samples closed.
  std::vector<double> run(step_sampler& sampler, step_detector& detector,
                          step_sampler::clock::time_point& t, int steps) const {
    std::vector<double> scores;
    for (int s = 0; s < steps; ++s) {
      t += pause;
      for (int l = 0; l < lists; ++l) {
        int sent = 0;
        for (int i = tensors * l / lists; i < tensors * (l + 1) / lists; ++i, ++sent)
          detector.add_name("grad." + std::to_string(i));
        t += per_list;
        const bool begins = detector.end_list();
        if (auto score = sampler.add({t, generation, bytes * sent, begins}))
          scores.push_back(*score);
      }
    }
    return scores;
  }
};

std::vector<double> scores_of(const job& j, int steps_per_sample, int steps) {
  step_sampler sampler(steps_per_sample);
  step_detector detector;
  step_sampler::clock::time_point t{};
  // The first list of a generation carries the change and is not counted.
  sampler.add({t, j.generation, 0, false});
  return j.run(sampler, detector, t, steps);
}

TEST(StepSampler, AStepCutIntoManyListsIsScoredOverWholeStepsPausesIncluded) {
  // A small fusion threshold cuts the step into 40 lists, 12 ms in all; a
  // large one sends it in 2 lists, 8 ms in all. Both pause 10 ms per step,
  // so the large threshold is faster (18 against 22 ms a step). Samples of
  // 10 lists (the scoring this replaced) saw the pause in one sample of 4
  // of the small threshold's and scored it above the large one.
  job fragmented;
  fragmented.lists = 40;
  fragmented.per_list = microseconds(300);
  job whole;
  whole.lists = 2;
  whole.per_list = microseconds(4000);
  ASSERT_GT(whole.true_throughput(), fragmented.true_throughput());
  for (const job* j : {&fragmented, &whole}) {
    const auto scores = scores_of(*j, 10, 65);
    // Step 1 (after the change's list) starts the first sample at step 2.
    ASSERT_EQ(scores.size(), 6u) << j->lists << " lists per step";
    for (double s : scores)
      EXPECT_NEAR(s, j->true_throughput(), 1e-6 * j->true_throughput()) << j->lists;
  }
  EXPECT_GT(scores_of(whole, 10, 65).front(), scores_of(fragmented, 10, 65).front());
}

TEST(StepSampler, ListsOfTheOldSettingsAndTheChangeItselfAreNotCounted) {
  step_sampler sampler(1);
  step_detector detector;
  step_sampler::clock::time_point t{};
  job fast;
  fast.lists = 2;
  fast.per_list = microseconds(1000);
  fast.generation = 0;
  sampler.add({t, 0, 0, false});
  ASSERT_FALSE(fast.run(sampler, detector, t, 3).empty());
  sampler.change_sent();
  // Slow lists of generation 0 executed after the change was sent: ignored.
  job slow = fast;
  slow.per_list = microseconds(50000);
  EXPECT_TRUE(slow.run(sampler, detector, t, 3).empty());
  // The change arrives mid-step: its list and the rest of that step do not
  // count; samples start with the next step.
  detector.add_name("grad.80");
  t += microseconds(100000);
  EXPECT_FALSE(sampler.add({t, 1, 1 << 30, detector.end_list()}));
  fast.generation = 1;
  const auto scores = fast.run(sampler, detector, t, 4);
  ASSERT_EQ(scores.size(), 3u);
  for (double s : scores)
    EXPECT_NEAR(s, fast.true_throughput(), 1e-6 * fast.true_throughput());
}

TEST(StepSampler, AStepStalledByAnotherProcessDoesNotMoveTheScore) {
  // 10-step samples; the 5th step of the first sample waits 200 ms more
  // (the host busy elsewhere). Over the sample's whole time it would score
  // a third of the throughput; the median of its steps ignores it.
  job j;
  j.lists = 2;
  j.per_list = microseconds(1000);
  step_sampler sampler(10);
  step_detector detector;
  step_sampler::clock::time_point t{};
  sampler.add({t, j.generation, 0, false});
  auto scores = j.run(sampler, detector, t, 5);
  t += microseconds(200000);
  const auto more = j.run(sampler, detector, t, 17);
  scores.insert(scores.end(), more.begin(), more.end());
  ASSERT_EQ(scores.size(), 2u);
  for (double s : scores)
    EXPECT_NEAR(s, j.true_throughput(), 1e-6 * j.true_throughput());
}

TEST(StepSampler, RefusesSamplesOfNoStep) {
  EXPECT_THROW(step_sampler(0), std::invalid_argument);
}

} // namespace
} // namespace troupe::autotune
