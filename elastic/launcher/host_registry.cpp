#include "elastic/launcher/host_registry.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::elastic::launcher {

host_registry::host_registry(std::optional<cooldown_range> cooldown, unsigned seed)
  : cooldown_(cooldown), rng_(seed) {
}

void host_registry::update(const std::vector<host_spec>& listed) {
  for (auto& h : hosts_)
    h.listed = false;
  for (const auto& spec : listed) {
    auto it = std::find_if(hosts_.begin(), hosts_.end(),
                           [&spec](const auto& h) { return h.spec.name == spec.name; });
    if (it == hosts_.end())
      it = hosts_.insert(hosts_.end(), host_state{spec, true, false, 0, std::nullopt});
    it->spec.slots = spec.slots;
    it->listed = true;
  }
}

void host_registry::blacklist(const std::string& name, clock::time_point now) {
  auto it = std::find_if(hosts_.begin(), hosts_.end(),
                         [&name](const auto& h) { return h.spec.name == name; });
  if (it == hosts_.end() || out(*it, now))
    return;  // a second failure during a cooldown does not extend it
  if (!cooldown_) {
    it->for_good = true;
    return;
  }
  ++it->failures;
  const double lower = cooldown_->min_seconds;
  const double delay =
    std::clamp(lower * std::pow(2.0, it->failures) +
                 std::uniform_real_distribution<double>(0, 1)(rng_) * lower,
               lower, static_cast<double>(cooldown_->max_seconds));
  it->cooldown_until =
    now + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(delay));
}

bool host_registry::out(const host_state& h, clock::time_point now) const {
  return h.for_good || (h.cooldown_until && now < *h.cooldown_until);
}

std::vector<host_spec> host_registry::usable(clock::time_point now) const {
  std::vector<host_spec> out_hosts;
  for (const auto& h : hosts_)
    if (h.listed && !out(h, now))
      out_hosts.push_back(h.spec);
  return out_hosts;
}

bool host_registry::all_blacklisted_for_good() const {
  bool any = false;
  for (const auto& h : hosts_) {
    if (!h.listed)
      continue;
    if (!h.for_good)
      return false;
    any = true;
  }
  return any;
}

std::optional<host_registry::clock::time_point>
host_registry::next_cooldown_end(clock::time_point now) const {
  std::optional<clock::time_point> next;
  for (const auto& h : hosts_)
    if (h.cooldown_until && *h.cooldown_until > now && (!next || *h.cooldown_until < *next))
      next = h.cooldown_until;
  return next;
}

host_registry::counts host_registry::count(clock::time_point now) const {
  counts c;
  for (const auto& h : hosts_) {
    if (!h.listed)
      continue;
    if (h.for_good)
      ++c.blacklisted;
    else if (out(h, now))
      ++c.cooling_down;
    else
      ++c.active;
  }
  return c;
}

} // namespace troupe::elastic::launcher
