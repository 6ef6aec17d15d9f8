#include "autotune/gaussian_process.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <Eigen/Cholesky>
#include <LBFGSB.h>

namespace troupe::autotune {

namespace {

// Hyperparameter bounds, for inputs scaled to the unit cube and
// standardised targets: a length scale beyond 1 claims the score is nearly
// linear across the whole box, below 0.01 it interpolates noise.
constexpr double min_length = 0.01;
constexpr double max_length = 1;
constexpr double min_signal = 0.1;
constexpr double max_signal = 10;
// Added to the diagonal until the kernel factorises (duplicate points with
// no noise).
constexpr double first_jitter = 1e-10;
constexpr int jitter_tries = 8;

} // namespace

gaussian_process::gaussian_process(double noise) : noise_(noise) {
  if (!(noise >= 0) || !std::isfinite(noise))
    throw std::invalid_argument("gaussian_process: noise must be a finite number >= 0");
}

bool gaussian_process::factorise() {
  const auto n = x_.rows();
  Eigen::MatrixXd k = signal_ * signal_ * (-sq_dist_ / (2 * length_ * length_)).array().exp();
  double jitter = 0;
  for (int i = 0; i < jitter_tries; ++i) {
    Eigen::MatrixXd kn = k;
    kn.diagonal().array() += noise_ + jitter;
    Eigen::LLT<Eigen::MatrixXd> llt(kn);
    if (llt.info() == Eigen::Success) {
      chol_ = llt.matrixL();
      alpha_ = llt.solve(y_);
      return true;
    }
    jitter = jitter == 0 ? first_jitter : jitter * 100;
  }
  chol_ = Eigen::MatrixXd::Identity(n, n);
  alpha_ = y_;
  return false;
}

double gaussian_process::negative_log_likelihood(const Eigen::VectorXd& log_params,
                                                 Eigen::VectorXd& grad) {
  length_ = std::exp(log_params[0]);
  signal_ = std::exp(log_params[1]);
  grad.setZero();
  if (!factorise())
    return std::numeric_limits<double>::max() / 4;
  const auto n = static_cast<double>(x_.rows());
  const double nll = 0.5 * y_.dot(alpha_) + chol_.diagonal().array().log().sum() +
                     0.5 * n * std::log(2 * M_PI);
  // d nll / d theta = 1/2 tr((K⁻¹ - a aᵀ) dK/d theta).
  Eigen::MatrixXd k_inv = Eigen::MatrixXd::Identity(x_.rows(), x_.rows());
  chol_.triangularView<Eigen::Lower>().solveInPlace(k_inv);
  chol_.triangularView<Eigen::Lower>().transpose().solveInPlace(k_inv);
  const Eigen::MatrixXd w = k_inv - alpha_ * alpha_.transpose();
  const Eigen::MatrixXd kf =
    signal_ * signal_ * (-sq_dist_ / (2 * length_ * length_)).array().exp();
  grad[0] = 0.5 * (w.array() * kf.array() * sq_dist_.array()).sum() / (length_ * length_);
  grad[1] = (w.array() * kf.array()).sum();
  return nll;
}

void gaussian_process::fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  if (x.rows() == 0 || x.rows() != y.size())
    throw std::invalid_argument("gaussian_process::fit: needs as many values as points (>= 1)");
  x_ = x;
  y_mean_ = y.mean();
  const double var = (y.array() - y_mean_).square().mean();
  y_scale_ = var > 0 ? std::sqrt(var) : 1.0;
  y_ = (y.array() - y_mean_) / y_scale_;
  const auto n = x.rows();
  sq_dist_.resize(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j)
      sq_dist_(i, j) = (x.row(i) - x.row(j)).squaredNorm();

  // Fit from a few length scales; keep the best point any run evaluated
  // (a run can stop early, e.g. when the line search gives up).
  Eigen::VectorXd best(2);
  double best_nll = std::numeric_limits<double>::infinity();
  auto objective = [&](const Eigen::VectorXd& p, Eigen::VectorXd& g) {
    const double v = negative_log_likelihood(p, g);
    if (v < best_nll) {
      best_nll = v;
      best = p;
    }
    return v;
  };
  LBFGSpp::LBFGSBParam<double> param;
  param.epsilon = 1e-5;
  param.max_iterations = 100;
  LBFGSpp::LBFGSBSolver<double> solver(param);
  Eigen::VectorXd lower(2), upper(2);
  lower << std::log(min_length), std::log(min_signal);
  upper << std::log(max_length), std::log(max_signal);
  for (double start_length : {0.1, 0.3, 1.0}) {
    Eigen::VectorXd p(2);
    p << std::log(start_length), 0.0;
    double value = 0;
    try {
      solver.minimize(objective, p, value, lower, upper);
    } catch (const std::exception&) {
      // The best point evaluated so far stands.
    }
  }
  length_ = std::exp(best[0]);
  signal_ = std::exp(best[1]);
  factorise();
}

gaussian_process::prediction gaussian_process::predict(const Eigen::VectorXd& point,
                                                       bool gradient) const {
  const auto n = x_.rows();
  const double l2 = length_ * length_;
  const double s2 = signal_ * signal_;
  Eigen::VectorXd k(n);
  for (Eigen::Index i = 0; i < n; ++i)
    k[i] = s2 * std::exp(-(x_.row(i).transpose() - point).squaredNorm() / (2 * l2));
  const Eigen::VectorXd v = chol_.triangularView<Eigen::Lower>().solve(k);
  const double var = std::max(s2 - v.squaredNorm(), 1e-12);
  prediction out;
  out.mean = y_mean_ + y_scale_ * k.dot(alpha_);
  out.sd = y_scale_ * std::sqrt(var);
  if (gradient) {
    // d k_i / d point = k_i (x_i - point) / l².
    Eigen::MatrixXd dk = (x_.rowwise() - point.transpose()) / l2;
    dk.array().colwise() *= k.array();
    const Eigen::VectorXd k_inv_k = chol_.triangularView<Eigen::Lower>().transpose().solve(v);
    out.d_mean = y_scale_ * dk.transpose() * alpha_;
    const Eigen::VectorXd d_var = -2 * dk.transpose() * k_inv_k;
    out.d_sd = y_scale_ * d_var / (2 * std::sqrt(var));
  }
  return out;
}

} // namespace troupe::autotune
