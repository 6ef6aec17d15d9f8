#include "autotune/finalist_rescoring.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "autotune/median.hpp"

namespace troupe::autotune {

std::vector<settings> choose_finalists(const std::vector<scored_setting>& history,
                                       const settings& initial, int count) {
  std::vector<settings> distinct;
  for (const auto& h : history)
    if (h.setting != initial &&
        std::find(distinct.begin(), distinct.end(), h.setting) == distinct.end())
      distinct.push_back(h.setting);
  std::vector<scored_setting> ranked;
  for (const auto& s : distinct) {
    std::vector<double> scores;
    for (const auto& h : history)
      if (h.setting == s)
        scores.push_back(h.score);
    ranked.push_back({s, median(std::move(scores))});
  }
  // Stable: of equal scores, the one scored first.
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.score > b.score; });
  std::vector<settings> out;
  for (size_t i = 0; i < ranked.size() && static_cast<int>(i) < count; ++i)
    out.push_back(ranked[i].setting);
  out.push_back(initial);
  return out;
}

finalist_rescoring::finalist_rescoring(std::vector<settings> finalists, int rounds)
  : finalists_(std::move(finalists)), rounds_(static_cast<size_t>(std::max(rounds, 0))),
    samples_(rounds_, std::vector<double>(finalists_.size())) {
  if (finalists_.empty() || rounds < 1)
    throw std::invalid_argument("finalist_rescoring: needs finalists and at least 1 round, got " +
                                std::to_string(finalists_.size()) + " finalists and " +
                                std::to_string(rounds) + " rounds");
}

const settings& finalist_rescoring::current() const {
  // Sample k of round r = k / n is finalist (k + r) % n: each round starts
  // one later than the one before.
  const size_t n = finalists_.size();
  return finalists_[(taken_ + std::min(taken_ / n, rounds_ - 1)) % n];
}

bool finalist_rescoring::record(double score) {
  if (finished())
    return false;
  const size_t n = finalists_.size();
  samples_[taken_ / n][static_cast<size_t>(&current() - finalists_.data())] = score;
  if (++taken_ < n * rounds_)
    return false;
  this->score();
  return true;
}

void finalist_rescoring::score() {
  std::vector<double> all;
  std::vector<std::vector<double>> relative(finalists_.size());
  for (const auto& round : samples_) {
    all.insert(all.end(), round.begin(), round.end());
    const double typical = median(round);
    for (size_t i = 0; i < round.size(); ++i)
      relative[i].push_back(typical > 0 ? round[i] / typical : 0.0);
  }
  const double typical = median(std::move(all));
  std::vector<double> deviations;
  for (size_t i = 0; i < finalists_.size(); ++i) {
    const double mid = median(relative[i]);
    for (double r : relative[i])
      deviations.push_back(std::abs(r - mid));
    scored_.push_back({finalists_[i], mid * typical});
  }
  // Normal noise: sigma = 1.4826 MAD; the standard error of a median of k
  // samples 1.2533 sigma / sqrt(k); of a difference of two, sqrt(2) times
  // that. A single round has no scatter to measure.
  if (rounds_ > 1)
    margin_ = 2 * std::sqrt(2.0) * 1.2533 * 1.4826 * median(std::move(deviations)) /
              std::sqrt(static_cast<double>(rounds_));
}

const scored_setting& finalist_rescoring::winner() const {
  const scored_setting& incumbent = scored_.back();
  const scored_setting* best = &incumbent;
  // Of equal scores, the one given first.
  for (const auto& s : scored_)
    if (s.score > incumbent.score * (1 + margin_) &&
        (best == &incumbent || s.score > best->score))
      best = &s;
  return *best;
}

} // namespace troupe::autotune
