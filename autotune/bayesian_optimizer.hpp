#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <Eigen/Core>

#include "autotune/gaussian_process.hpp"

namespace troupe::autotune {

/// How a bayesian_optimizer searches.
struct bayes_options {
  /// The box searched: one lower and one upper bound per dimension.
  Eigen::VectorXd lower;
  Eigen::VectorXd upper;
  /// Observation noise of the Gaussian process (see gaussian_process).
  double noise = 0.8;
  /// Exploration margin of expected improvement, in standardised scores
  /// (Horovod's 0.01).
  double xi = 0.01;
  /// The first proposals form a Latin hypercube of this many points (every
  /// dimension's range cut in as many strata, one point in each), so the
  /// model starts from a spread-out view rather than one corner.
  int initial_samples = 5;
  /// Random points at which expected improvement is evaluated, and how many
  /// of the best of them start an L-BFGS-B ascent (Horovod: 25 restarts).
  int candidates = 1000;
  int restarts = 25;
  /// Seeds every random choice: same seed and samples, same proposals.
  uint64_t seed = 0;
};

/// Bayesian optimisation of a function maximised over a box: a Gaussian
/// process models the samples so far, and the next point is the one
/// maximising expected improvement over the best sample. Points are
/// scaled to the unit cube for the model.
class bayesian_optimizer {
public:
  /// Throws std::invalid_argument for an empty box or one with a lower
  /// bound not below its upper bound.
  explicit bayesian_optimizer(bayes_options options);

  /// Records f(point) = value.
  void add_sample(const Eigen::VectorXd& point, double value);

  /// The point to try next: the initial design's next point until each
  /// was proposed once, then the one maximising expected improvement.
  Eigen::VectorXd next_sample();

  size_t samples() const {
    return values_.size();
  }
  /// The best sample so far (requires samples() > 0).
  const Eigen::VectorXd& best_point() const {
    return points_[best_];
  }
  double best_value() const {
    return values_[best_];
  }

private:
  Eigen::VectorXd to_unit(const Eigen::VectorXd& point) const;
  Eigen::VectorXd from_unit(const Eigen::VectorXd& unit) const;
  Eigen::VectorXd random_unit_point();
  std::vector<Eigen::VectorXd> latin_hypercube(int n);
  // Expected improvement over `best` at `unit` (and its gradient).
  double expected_improvement(const Eigen::VectorXd& unit, double best,
                              Eigen::VectorXd* gradient) const;

  bayes_options options_;
  std::mt19937_64 rng_;
  gaussian_process model_;
  std::vector<Eigen::VectorXd> design_;  // unit cube
  size_t design_proposed_ = 0;
  std::vector<Eigen::VectorXd> points_;  // as given
  std::vector<double> values_;
  size_t best_ = 0;
};

} // namespace troupe::autotune
