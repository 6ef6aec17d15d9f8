#include "autotune/bayesian_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace troupe::autotune {
namespace {

double bump(double d2, double width) {
  return std::exp(-d2 / width);
}

// Two peaks, the lower one wide enough to trap a greedy search.
double one_d(const Eigen::VectorXd& p) {
  const double x = p[0];
  return bump((x - 7) * (x - 7), 2.0) + 0.6 * bump((x - 2) * (x - 2), 4.0);
}
constexpr double one_d_max = 1.0;  // at x = 7 (the other peak adds < 1e-10)

// On a box shaped like the tuner's (log2 bytes x milliseconds): the global
// peak, and a lower one in the opposite corner.
double two_d(const Eigen::VectorXd& p) {
  const double a = (p[0] - 12) / 15, b = p[1] / 5;
  return bump((a - 0.3) * (a - 0.3) + (b - 0.2) * (b - 0.2), 0.06) +
         0.6 * bump((a - 0.85) * (a - 0.85) + (b - 0.8) * (b - 0.8), 0.1);
}
constexpr double two_d_max = 1.0;  // at (16.5, 1); the other peak adds < 1e-3

bayes_options box(std::vector<double> lo, std::vector<double> hi, uint64_t seed) {
  bayes_options o;
  o.lower = Eigen::Map<Eigen::VectorXd>(lo.data(), static_cast<Eigen::Index>(lo.size()));
  o.upper = Eigen::Map<Eigen::VectorXd>(hi.data(), static_cast<Eigen::Index>(hi.size()));
  o.noise = 1e-4;
  o.seed = seed;
  return o;
}

// Runs `samples` proposals and returns them with the best value seen.
std::pair<std::vector<Eigen::VectorXd>, double> run(
  bayes_options o, const std::function<double(const Eigen::VectorXd&)>& f, int samples) {
  bayesian_optimizer opt(std::move(o));
  std::vector<Eigen::VectorXd> tried;
  for (int i = 0; i < samples; ++i) {
    auto p = opt.next_sample();
    opt.add_sample(p, f(p));
    tried.push_back(p);
  }
  return {tried, opt.best_value()};
}

TEST(BayesianOptimizer, FindsOneDimensionalMaximumWithinFivePercentIn20Samples) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto [tried, best] = run(box({0}, {10}, seed), one_d, 20);
    EXPECT_GE(best, 0.95 * one_d_max) << "seed " << seed;
    for (const auto& p : tried) {
      EXPECT_GE(p[0], 0);
      EXPECT_LE(p[0], 10);
    }
  }
}

TEST(BayesianOptimizer, FindsTwoDimensionalMaximumWithinFivePercentIn20Samples) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto [tried, best] = run(box({12, 0}, {27, 5}, seed), two_d, 20);
    EXPECT_GE(best, 0.95 * two_d_max) << "seed " << seed;
    for (const auto& p : tried) {
      EXPECT_TRUE(p[0] >= 12 && p[0] <= 27 && p[1] >= 0 && p[1] <= 5);
    }
  }
}

TEST(BayesianOptimizer, SameSeedSameProposalsOtherSeedOthers) {
  auto a = run(box({12, 0}, {27, 5}, 7), two_d, 8).first;
  auto b = run(box({12, 0}, {27, 5}, 7), two_d, 8).first;
  auto c = run(box({12, 0}, {27, 5}, 8), two_d, 8).first;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i], b[i]) << "proposal " << i;
  EXPECT_NE(a.front(), c.front());
}

TEST(BayesianOptimizer, NoisySamplesStillLeadToThePeak) {
  // Scores of a real job jitter: +-5 % multiplicative noise, Horovod's noise.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> jitter(0.95, 1.05);
  auto o = box({0}, {10}, 3);
  o.noise = 0.8;
  bayesian_optimizer opt(o);
  for (int i = 0; i < 20; ++i) {
    auto p = opt.next_sample();
    opt.add_sample(p, one_d(p) * jitter(rng));
  }
  EXPECT_GE(one_d(opt.best_point()), 0.9 * one_d_max);
}

// The search adds the configured setting before it asks: every point of
// the initial design is still proposed, one in each of its strata.
TEST(BayesianOptimizer, ProposesTheWholeInitialDesignAfterASampleOfItsOwn) {
  auto o = box({0}, {10}, 5);
  o.initial_samples = 5;
  bayesian_optimizer opt(o);
  opt.add_sample(Eigen::VectorXd::Constant(1, 3.0), 0.5);
  std::vector<bool> stratum(5, false);
  for (int i = 0; i < 5; ++i) {
    const auto p = opt.next_sample();
    const auto s = static_cast<size_t>(p[0] / 2);
    ASSERT_LT(s, stratum.size());
    EXPECT_FALSE(stratum[s]) << p[0];
    stratum[s] = true;
    opt.add_sample(p, one_d(p));
  }
  EXPECT_EQ(std::count(stratum.begin(), stratum.end(), true), 5);
}

TEST(BayesianOptimizer, RejectsBadBoxesAndValues) {
  EXPECT_THROW(bayesian_optimizer(box({}, {}, 0)), std::invalid_argument);
  EXPECT_THROW(bayesian_optimizer(box({1}, {1}, 0)), std::invalid_argument);
  EXPECT_THROW(bayesian_optimizer(box({0, 0}, {1}, 0)), std::invalid_argument);
  bayesian_optimizer opt(box({0}, {1}, 0));
  EXPECT_THROW(opt.add_sample(Eigen::VectorXd::Zero(1), std::nan("")), std::invalid_argument);
  EXPECT_THROW(opt.add_sample(Eigen::VectorXd::Zero(2), 1.0), std::invalid_argument);
}

TEST(GaussianProcess, InterpolatesSamplesAndIsUncertainFarFromThem) {
  Eigen::MatrixXd x(3, 1);
  x << 0.1, 0.5, 0.9;
  Eigen::VectorXd y(3);
  y << 1.0, 3.0, 2.0;
  gaussian_process gp(1e-6);
  gp.fit(x, y);
  for (int i = 0; i < 3; ++i) {
    const auto p = gp.predict(x.row(i).transpose(), false);
    EXPECT_NEAR(p.mean, y[i], 1e-2);
    EXPECT_LT(p.sd, 0.05);
  }
  Eigen::VectorXd far(1);
  far << 3.0;
  EXPECT_GT(gp.predict(far, false).sd, 0.5);
}

TEST(GaussianProcess, GradientsMatchFiniteDifferences) {
  Eigen::MatrixXd x(4, 2);
  x << 0.1, 0.2, 0.7, 0.3, 0.4, 0.9, 0.8, 0.8;
  Eigen::VectorXd y(4);
  y << 1.0, 2.5, 0.5, 1.5;
  gaussian_process gp(0.1);
  gp.fit(x, y);
  Eigen::VectorXd p(2);
  p << 0.45, 0.55;
  const auto at = gp.predict(p, true);
  const double h = 1e-6;
  for (int d = 0; d < 2; ++d) {
    Eigen::VectorXd q = p;
    q[d] += h;
    const auto moved = gp.predict(q, false);
    EXPECT_NEAR((moved.mean - at.mean) / h, at.d_mean[d], 1e-4);
    EXPECT_NEAR((moved.sd - at.sd) / h, at.d_sd[d], 1e-4);
  }
}

} // namespace
} // namespace troupe::autotune
