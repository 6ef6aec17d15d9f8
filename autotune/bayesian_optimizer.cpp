#include "autotune/bayesian_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include <LBFGSB.h>

namespace troupe::autotune {

namespace {

double normal_pdf(double z) {
  return std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
}

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

} // namespace

bayesian_optimizer::bayesian_optimizer(bayes_options options)
  : options_(std::move(options)), rng_(options_.seed), model_(options_.noise) {
  const auto& lo = options_.lower;
  const auto& hi = options_.upper;
  if (lo.size() == 0 || lo.size() != hi.size())
    throw std::invalid_argument("bayesian_optimizer: needs one lower and one upper bound per "
                                "dimension");
  for (Eigen::Index i = 0; i < lo.size(); ++i)
    if (!(lo[i] < hi[i]) || !std::isfinite(lo[i]) || !std::isfinite(hi[i]))
      throw std::invalid_argument("bayesian_optimizer: dimension " + std::to_string(i) +
                                  " has bounds [" + std::to_string(lo[i]) + ", " +
                                  std::to_string(hi[i]) + "]");
  if (options_.candidates < 1 || options_.restarts < 0 || options_.initial_samples < 0)
    throw std::invalid_argument("bayesian_optimizer: needs at least one candidate and no "
                                "negative restart or initial-design count");
  design_ = latin_hypercube(options_.initial_samples);
}

std::vector<Eigen::VectorXd> bayesian_optimizer::latin_hypercube(int n) {
  std::vector<Eigen::VectorXd> points(static_cast<size_t>(n),
                                      Eigen::VectorXd(options_.lower.size()));
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<int> strata(static_cast<size_t>(n));
  for (Eigen::Index d = 0; d < options_.lower.size(); ++d) {
    for (int i = 0; i < n; ++i)
      strata[static_cast<size_t>(i)] = i;
    std::shuffle(strata.begin(), strata.end(), rng_);
    for (int i = 0; i < n; ++i)
      points[static_cast<size_t>(i)][d] = (strata[static_cast<size_t>(i)] + uniform(rng_)) / n;
  }
  return points;
}

Eigen::VectorXd bayesian_optimizer::to_unit(const Eigen::VectorXd& point) const {
  return ((point - options_.lower).array() / (options_.upper - options_.lower).array())
    .cwiseMax(0.0)
    .cwiseMin(1.0);
}

Eigen::VectorXd bayesian_optimizer::from_unit(const Eigen::VectorXd& unit) const {
  return options_.lower.array() + unit.array() * (options_.upper - options_.lower).array();
}

Eigen::VectorXd bayesian_optimizer::random_unit_point() {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  Eigen::VectorXd p(options_.lower.size());
  for (Eigen::Index i = 0; i < p.size(); ++i)
    p[i] = uniform(rng_);
  return p;
}

void bayesian_optimizer::add_sample(const Eigen::VectorXd& point, double value) {
  if (point.size() != options_.lower.size() || !std::isfinite(value))
    throw std::invalid_argument("bayesian_optimizer::add_sample: wrong dimension or a value "
                                "that is not finite");
  points_.push_back(point);
  values_.push_back(value);
  if (value > values_[best_])
    best_ = values_.size() - 1;
}

double bayesian_optimizer::expected_improvement(const Eigen::VectorXd& unit, double best,
                                                Eigen::VectorXd* gradient) const {
  const auto p = model_.predict(unit, gradient != nullptr);
  const double gain = p.mean - best;
  const double z = gain / p.sd;
  const double ei = gain * normal_cdf(z) + p.sd * normal_pdf(z);
  if (gradient)
    // dEI/dmean = Phi(z), dEI/dsd = phi(z).
    *gradient = normal_cdf(z) * p.d_mean + normal_pdf(z) * p.d_sd;
  return ei;
}

Eigen::VectorXd bayesian_optimizer::next_sample() {
  // Every design point in turn, whatever samples were added besides them
  // (the search adds the configured setting first).
  if (design_proposed_ < design_.size())
    return from_unit(design_[design_proposed_++]);
  const auto dims = options_.lower.size();
  Eigen::MatrixXd x(static_cast<Eigen::Index>(points_.size()), dims);
  Eigen::VectorXd y(static_cast<Eigen::Index>(values_.size()));
  for (size_t i = 0; i < points_.size(); ++i) {
    x.row(static_cast<Eigen::Index>(i)) = to_unit(points_[i]).transpose();
    y[static_cast<Eigen::Index>(i)] = values_[i];
  }
  model_.fit(x, y);
  // xi is in standard deviations of the samples, so it means the same
  // whatever the scores' unit.
  const double spread = std::sqrt((y.array() - y.mean()).square().mean());
  const double best = y.maxCoeff() + options_.xi * (spread > 0 ? spread : 1.0);

  // Score random candidates, then climb from the best of them.
  std::vector<std::pair<double, Eigen::VectorXd>> starts;
  starts.reserve(static_cast<size_t>(options_.candidates));
  for (int i = 0; i < options_.candidates; ++i) {
    auto u = random_unit_point();
    starts.emplace_back(expected_improvement(u, best, nullptr), std::move(u));
  }
  const auto climbs = std::min<size_t>(static_cast<size_t>(options_.restarts), starts.size());
  std::partial_sort(starts.begin(), starts.begin() + static_cast<std::ptrdiff_t>(climbs),
                    starts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  double best_ei = starts.front().first;
  Eigen::VectorXd best_unit = starts.front().second;
  auto negative_ei = [&](const Eigen::VectorXd& u, Eigen::VectorXd& grad) {
    const double ei = expected_improvement(u, best, &grad);
    grad = -grad;
    if (ei > best_ei) {
      best_ei = ei;
      best_unit = u;
    }
    return -ei;
  };
  LBFGSpp::LBFGSBParam<double> param;
  param.epsilon = 1e-5;
  param.max_iterations = 100;
  LBFGSpp::LBFGSBSolver<double> solver(param);
  const Eigen::VectorXd lower = Eigen::VectorXd::Zero(dims);
  const Eigen::VectorXd upper = Eigen::VectorXd::Ones(dims);
  for (size_t i = 0; i < climbs; ++i) {
    Eigen::VectorXd u = starts[i].second;
    double value = 0;
    try {
      solver.minimize(negative_ei, u, value, lower, upper);
    } catch (const std::exception&) {
      // The best point evaluated so far stands.
    }
  }
  return from_unit(best_unit);
}

} // namespace troupe::autotune
