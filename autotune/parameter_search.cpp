#include "autotune/parameter_search.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "autotune/bayesian_optimizer.hpp"
#include "autotune/finalist_rescoring.hpp"
#include "autotune/median.hpp"

namespace troupe::autotune {

namespace {

constexpr int fusion_dim = 0;
constexpr int cycle_dim = 1;

} // namespace

parameter_search::parameter_search(search_options options)
  : options_(std::move(options)), warmup_left_(options_.warmup_samples),
    current_(options_.initial) {
  if (options_.warmup_samples < 0 || options_.max_samples < 1 ||
      options_.samples_per_setting < 1 || options_.finalists < 0)
    throw std::invalid_argument("parameter_search: needs warm-up samples >= 0, finalists >= 0, "
                                "and at least one sample per setting and one Bayesian sample");
  if (options_.tune_fusion)
    dims_.push_back(fusion_dim);
  if (options_.tune_cycle)
    dims_.push_back(cycle_dim);
  if (!dims_.empty()) {
    bayes_options bo;
    const auto n = static_cast<Eigen::Index>(dims_.size());
    bo.lower.resize(n);
    bo.upper.resize(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      const bool fusion = dims_[static_cast<size_t>(i)] == fusion_dim;
      bo.lower[i] = fusion ? min_log2_fusion : 0.0;
      bo.upper[i] = fusion ? max_log2_fusion : max_cycle_time_ms;
    }
    bo.noise = options_.noise;
    bo.seed = options_.seed;
    optimizer_ = std::make_unique<bayesian_optimizer>(std::move(bo));
  }
  if (warmup_left_ == 0)
    advance(stage::bayes);
}

parameter_search::~parameter_search() = default;

namespace {

// The optimiser's point for `s`: one coordinate per tuned dimension.
Eigen::VectorXd to_point(const std::vector<int>& dims, const settings& s) {
  Eigen::VectorXd p(static_cast<Eigen::Index>(dims.size()));
  for (size_t i = 0; i < dims.size(); ++i)
    p[static_cast<Eigen::Index>(i)] =
      dims[i] == fusion_dim
        ? std::clamp(std::log2(static_cast<double>(std::max<int64_t>(s.fusion_threshold, 1))),
                     min_log2_fusion, max_log2_fusion)
        : std::clamp(s.cycle_time_ms, 0.0, max_cycle_time_ms);
  return p;
}

// `base` with the tuned dimensions taken from `point`.
settings from_point(const std::vector<int>& dims, const Eigen::VectorXd& point, settings s) {
  for (size_t i = 0; i < dims.size(); ++i) {
    const double v = point[static_cast<Eigen::Index>(i)];
    if (dims[i] == fusion_dim)
      s.fusion_threshold = static_cast<int64_t>(std::llround(std::exp2(v)));
    else
      // Microseconds are what the coordinator applies.
      s.cycle_time_ms = std::round(v * 1000) / 1000;
  }
  return s;
}

} // namespace

void parameter_search::advance(stage next) {
  scores_.clear();
  if (next == stage::bayes && !optimizer_)
    next = stage::baseline;
  if (next == stage::baseline && (best_ || (!options_.tune_cache && !options_.tune_chunk)))
    next = stage::cache;  // a Bayesian stage already scored a baseline
  if (next == stage::cache && !options_.tune_cache)
    next = stage::chunk;
  if (next == stage::chunk) {
    chunks_left_.clear();
    if (options_.tune_chunk && best_) {
      // The chunk the best setting runs with (-1 while unknown).
      const auto tried =
        best_->fusion_chunk_bytes < 0 ? configured_chunk_ : best_->fusion_chunk_bytes;
      for (auto c : options_.chunk_candidates)
        if (c != tried)
          chunks_left_.push_back(c);
    }
    if (!next_chunk())
      next = stage::rescore;
  }
  if (next == stage::rescore && (options_.finalists == 0 || !best_))
    next = stage::done;
  stage_ = next;
  switch (next) {
  case stage::bayes:
  case stage::baseline:
    current_ = options_.initial;  // the first candidate: what the user configured
    break;
  case stage::cache:
    current_ = *best_;
    current_.cache_enabled = !current_.cache_enabled;
    break;
  case stage::chunk:  // next_chunk() chose current_
    break;
  case stage::rescore:
    rescoring_ = std::make_unique<finalist_rescoring>(
      choose_finalists(history_, options_.initial, options_.finalists),
      options_.samples_per_setting);
    current_ = rescoring_->current();
    break;
  case stage::done:
    if (best_)
      current_ = *best_;
    break;
  case stage::warmup:
    break;
  }
}

parameter_search::step parameter_search::record(double score) {
  step out;
  if (stage_ == stage::done)
    return out;
  if (stage_ == stage::warmup) {
    if (--warmup_left_ == 0)
      advance(stage::bayes);
    return out;
  }
  if (!std::isfinite(score))
    score = 0;
  const settings before = current_;
  if (stage_ == stage::rescore) {
    record_finalist(score, out);
  } else {
    scores_.push_back(score);
    if (static_cast<int>(scores_.size()) < options_.samples_per_setting)
      return out;
    score_current(out);
  }
  out.changed = current_ != before;
  out.finished = stage_ == stage::done;
  return out;
}

void parameter_search::record_finalist(double score, step& out) {
  if (!rescoring_->record(score)) {
    current_ = rescoring_->current();
    return;
  }
  out.rescored = rescoring_->scored();
  out.margin = rescoring_->margin();
  best_ = rescoring_->winner().setting;
  best_score_ = rescoring_->winner().score;
  advance(stage::done);
}

void parameter_search::score_current(step& out) {
  out.scored = current_;
  out.score = median(scores_);
  history_.push_back({current_, out.score});
  if (!best_ || out.score > best_score_) {
    best_ = current_;
    best_score_ = out.score;
  }
  switch (stage_) {
  case stage::bayes:
    optimizer_->add_sample(to_point(dims_, current_), out.score);
    if (static_cast<int>(optimizer_->samples()) >= options_.max_samples) {
      advance(stage::cache);
    } else {
      scores_.clear();
      current_ = from_point(dims_, optimizer_->next_sample(), current_);
    }
    break;
  case stage::baseline:
    advance(stage::cache);
    break;
  case stage::cache:
    advance(stage::chunk);
    break;
  default:  // the chunk stage
    scores_.clear();
    if (!next_chunk())
      advance(stage::rescore);
    break;
  }
}

bool parameter_search::next_chunk() {
  if (chunks_left_.empty())
    return false;
  current_ = *best_;
  current_.fusion_chunk_bytes = chunks_left_.front();
  chunks_left_.erase(chunks_left_.begin());
  return true;
}

} // namespace troupe::autotune
