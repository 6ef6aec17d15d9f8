#pragma once

#include <optional>
#include <vector>

#include "autotune/settings.hpp"

namespace troupe::autotune {

/// The settings a search re-scores before it freezes one: `initial` (the
/// configured setting) and the `count` best other settings of `history`,
/// a setting scored more than once ranked by the median of its scores.
/// Best first, `initial` last; fewer where `history` holds fewer.
std::vector<settings> choose_finalists(const std::vector<scored_setting>& history,
                                       const settings& initial, int count);

/// Scores finalists again with fresh samples before one is frozen. The
/// search's scores come one setting after another, minutes apart on a long
/// search, and the best of twenty noisy scores is mostly one that was
/// lucky (measured too high) rather than the fastest: on a shared host the
/// load drifts between settings. Here every round takes one sample of each
/// finalist, each round starting at the next finalist, and a sample counts
/// relative to the median of its round, so load that lasts a round reaches
/// every finalist alike and cancels. A finalist's score is the median of
/// its relative samples times the median of all samples: bytes per second
/// at the rounds' typical load.
///
/// The last finalist is the incumbent (choose_finalists() puts the
/// configured setting there). Another finalist replaces it only when its
/// score is higher by more than the rescoring can tell from noise: twice
/// the standard error of a difference of two medians of `rounds` samples,
/// estimated from the rounds' own scatter (the median absolute deviation
/// of the relative samples). On a shared host the finalists of a ResNet-50
/// search often differ by less than the noise, and a lucky measurement
/// froze the response cache off, 9 % slower in fact (docs/benchmarks.md).
class finalist_rescoring {
public:
  /// Throws std::invalid_argument for no finalists or fewer than 1 round.
  finalist_rescoring(std::vector<settings> finalists, int rounds);

  /// The finalist to take the next sample of.
  const settings& current() const;

  /// Records a sample of current(); true when that was the last one.
  bool record(double score);

  bool finished() const {
    return !scored_.empty();
  }
  /// Every finalist with its score, in the order given (once finished()).
  const std::vector<scored_setting>& scored() const {
    return scored_;
  }
  /// The finalist with the highest score of those that beat the incumbent
  /// by more than margin(); the incumbent when none does (requires
  /// finished()).
  const scored_setting& winner() const;
  /// The relative gain over the incumbent's score that a finalist needs to
  /// replace it (once finished(); 0 with a single round).
  double margin() const {
    return margin_;
  }

private:
  // Scores every finalist from the samples of all rounds.
  void score();

  std::vector<settings> finalists_;
  size_t rounds_;
  std::vector<std::vector<double>> samples_;  // [round][finalist]
  size_t taken_ = 0;                          // samples recorded
  std::vector<scored_setting> scored_;
  double margin_ = 0;
};

} // namespace troupe::autotune
