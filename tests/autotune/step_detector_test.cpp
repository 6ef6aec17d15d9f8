#include "autotune/step_detector.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace troupe::autotune {
namespace {

bool list_of(step_detector& d, const std::vector<std::string>& names) {
  for (const auto& n : names)
    d.add_name(n);
  return d.end_list();
}

TEST(StepDetector, AStepBeginsWhereATensorNameRepeats) {
  step_detector d;
  EXPECT_FALSE(list_of(d, {"a", "b"}));  // the first step: nothing to repeat
  EXPECT_FALSE(list_of(d, {"c"}));
  EXPECT_FALSE(list_of(d, {}));  // a list of settings only
  EXPECT_TRUE(list_of(d, {"a"}));
  EXPECT_FALSE(list_of(d, {"b", "c"}));
  // A name seen only in an earlier step does not begin another one.
  EXPECT_FALSE(list_of(d, {"flag"}));
  EXPECT_TRUE(list_of(d, {"b", "a"}));
  EXPECT_FALSE(list_of(d, {"c", "flag"}));
}

TEST(StepDetector, AListHoldingTheEndOfOneStepAndTheStartOfTheNextBeginsAStep) {
  step_detector d;
  EXPECT_FALSE(list_of(d, {"a", "b"}));
  EXPECT_TRUE(list_of(d, {"c", "a"}));  // c ends the first step, a starts the second
  EXPECT_FALSE(list_of(d, {"b"}));
  EXPECT_TRUE(list_of(d, {"c"}));
}

} // namespace
} // namespace troupe::autotune
