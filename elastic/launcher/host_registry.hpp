#pragma once

#include "elastic/launcher/host_plan.hpp"
#include "elastic/elastic_plan.hpp"

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace troupe::elastic::launcher {

/// --blacklist-cooldown-range MIN MAX, in seconds.
struct cooldown_range {
  int min_seconds = 1;
  int max_seconds = 1;
};

/// The hosts an elastic job knows, oldest first, and which of them may run
/// workers now. A host whose worker failed is blacklisted: for good, or,
/// with a cooldown range, for Horovod's delay (min * 2^failures +
/// U(0,1) * min, clamped to the range); once the delay is over it is used
/// again if discovery still lists it.
class host_registry {
public:
  using clock = std::chrono::steady_clock;

  explicit host_registry(std::optional<cooldown_range> cooldown,
                         unsigned seed = std::random_device{}());

  /// The hosts discovery lists now. Known hosts keep their place, new
  /// ones are appended in the listed order; unlisted hosts are not usable
  /// (and keep their place should they come back).
  void update(const std::vector<host_spec>& listed);

  /// A worker on `host` failed.
  void blacklist(const std::string& host, clock::time_point now);

  /// Listed hosts not blacklisted at `now`, oldest first.
  std::vector<host_spec> usable(clock::time_point now) const;

  /// Listed hosts exist, but every one of them is out for good.
  bool all_blacklisted_for_good() const;

  /// When the next cooldown ends (the usable hosts may change then).
  std::optional<clock::time_point> next_cooldown_end(clock::time_point now) const;

  /// Listed hosts by state at `now`.
  using counts = host_states;
  counts count(clock::time_point now) const;

private:
  struct host_state {
    host_spec spec;
    bool listed = false;
    bool for_good = false;
    int failures = 0;
    std::optional<clock::time_point> cooldown_until;
  };
  bool out(const host_state& h, clock::time_point now) const;

  std::optional<cooldown_range> cooldown_;
  std::mt19937 rng_;
  std::vector<host_state> hosts_;
};

} // namespace troupe::elastic::launcher
