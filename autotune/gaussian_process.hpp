#pragma once

#include <Eigen/Core>

namespace troupe::autotune {

/// Gaussian-process regression (Rasmussen & Williams, alg. 2.1) with an
/// isotropic squared-exponential kernel k(a, b) = s² exp(-|a - b|² / 2l²)
/// and `noise` added to the kernel's diagonal, as Horovod's autotuner
/// (noise = HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE). Targets are
/// standardised before fitting, so `noise` is relative to their variance.
/// The length scale l and signal s are those maximising the log marginal
/// likelihood (L-BFGS-B over bounded log values, LBFGS++).
class gaussian_process {
public:
  /// What the model says about one point, in the targets' units.
  struct prediction {
    double mean = 0;
    double sd = 0;
    Eigen::VectorXd d_mean;  // gradients with respect to the point (when asked)
    Eigen::VectorXd d_sd;
  };

  explicit gaussian_process(double noise);

  /// Fits the model to `x` (one point per row, at least one) and `y`.
  void fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y);

  /// The posterior at `point`; with `gradient`, also its derivatives.
  prediction predict(const Eigen::VectorXd& point, bool gradient) const;

  double length_scale() const {
    return length_;
  }
  double signal() const {
    return signal_;
  }

private:
  // Factorises the kernel for (length_, signal_); false if it is not
  // positive definite.
  bool factorise();
  // Negative log marginal likelihood at log(l), log(s), and its gradient.
  double negative_log_likelihood(const Eigen::VectorXd& log_params, Eigen::VectorXd& grad);

  double noise_;
  double length_ = 1;
  double signal_ = 1;
  double y_mean_ = 0;
  double y_scale_ = 1;
  Eigen::MatrixXd x_;
  Eigen::VectorXd y_;         // standardised
  Eigen::MatrixXd sq_dist_;   // |x_i - x_j|²
  Eigen::MatrixXd chol_;      // lower Cholesky factor of K + noise I
  Eigen::VectorXd alpha_;     // (K + noise I)⁻¹ y
};

} // namespace troupe::autotune
