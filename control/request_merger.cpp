#include "control/request_merger.hpp"

#include <algorithm>
#include <utility>

#include "proto/request_parameters.hpp"

namespace troupe::control {

std::vector<std::pair<int32_t, int32_t>>
joined_ranges(std::vector<std::pair<int32_t, int32_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const auto& r : ranges) {
    if (!out.empty() && out.back().second == r.first)
      out.back().second = r.second;
    else
      out.push_back(r);
  }
  return out;
}

std::vector<std::pair<int32_t, int32_t>>
missing_ranges(int32_t first, int32_t end, std::vector<std::pair<int32_t, int32_t>> covered) {
  std::sort(covered.begin(), covered.end());
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const auto& [from, to] : covered) {
    if (from > first)
      out.emplace_back(first, from);
    first = std::max(first, to);
  }
  if (first < end)
    out.emplace_back(first, end);
  return out;
}

request_merger::request_merger(int32_t first, int32_t end, clock::duration hold)
  : first_(first), end_(end), hold_(hold) {
}

void request_merger::add(const v1::Request& req, clock::time_point now, v1::RequestList& up) {
  const int32_t first = req.request_rank();
  const int64_t end64 = ranks_end(req);
  // Not this subtree's to merge (the coordinator names the error), or a
  // deadline, which the coordinator times from the first request it sees:
  // holding it here would move that later (internal collectives, rare).
  if (first < first_ || end64 > end_ || end64 <= first || req.deadline_ms() > 0) {
    pass(req, up);
    return;
  }
  const auto end = static_cast<int32_t>(end64);
  auto [it, fresh] = round_of(req.tensor_name(), first, end);
  if (fresh) {
    auto& r = it->second;
    r.request = req;
    r.request->set_request_rank(0);
    r.request->clear_hit_ranks_end();
    r.since = now;
    order_.emplace_back(now, it->first);
    ++held_count_;
  } else if (auto& r = it->second;
             r.request && (!same_collective(*r.request, req) || seen(r, first, end))) {
    // Members differ (or a broken peer named a rank twice): the
    // coordinator sees every request as it came and names who sent what.
    release(it, up);
  }
  auto& r = it->second;
  if (!r.request)
    pass(req, up);
  count(it, first, end, up);
}

void request_merger::arrived(const std::string* name, v1::RequestList& up) {
  if (!name)
    return release_all(up);
  if (auto it = rounds_.find(*name); it != rounds_.end() && it->second.request)
    release(it, up);
}

void request_merger::hits(const std::string& name, int32_t first, int32_t end,
                          v1::RequestList& up) {
  if (first < first_ || end > end_ || end <= first)
    return;
  auto it = round_of(name, first, end).first;
  if (it->second.request)
    release(it, up);
  count(it, first, end, up);
}

void request_merger::mixed(const std::string& name, v1::RequestList& up) {
  auto it = round_of(name, first_, first_).first;
  if (it->second.request)
    release(it, up);
}

void request_merger::answered(const std::string& name, v1::RequestList& up) {
  auto it = rounds_.find(name);
  if (it == rounds_.end())
    return;
  if (it->second.request)
    release(it, up);
  rounds_.erase(it);
}

void request_merger::release_all(v1::RequestList& up) {
  for (auto it = rounds_.begin(); it != rounds_.end(); ++it)
    if (it->second.request)
      release(it, up);
}

bool request_merger::has(const std::string& name) const {
  return rounds_.count(name) > 0;
}

void request_merger::release_due(clock::time_point now, v1::RequestList& up) {
  while (!order_.empty()) {
    const auto [since, name] = order_.front();
    auto it = rounds_.find(name);
    if (it != rounds_.end() && it->second.request && it->second.since == since) {
      if (now - since < hold_)
        break;  // the oldest held round is not due: none is
      ++counts_.expired;
      if (!late_)
        late_ = late_round{name, missing_ranges(first_, end_, it->second.ranges)};
      release(it, up);
    }
    order_.pop_front();
  }
}

std::optional<request_merger::clock::time_point> request_merger::next_deadline() const {
  for (const auto& [since, name] : order_) {
    auto it = rounds_.find(name);
    if (it != rounds_.end() && it->second.request && it->second.since == since)
      return since + hold_;
  }
  return std::nullopt;
}

std::pair<request_merger::rounds::iterator, bool>
request_merger::round_of(const std::string& name, int32_t first, int32_t end) {
  auto it = rounds_.find(name);
  if (it != rounds_.end() && (it->second.request || !seen(it->second, first, end)))
    return {it, false};
  // A round that went up as it came has seen one of these ranks: it is over
  // (no rank asks twice in one), and this is the next one.
  if (it != rounds_.end())
    rounds_.erase(it);
  bound();
  it = rounds_.try_emplace(name).first;
  it->second.seen.assign(static_cast<size_t>(end_ - first_), false);
  return {it, true};
}

bool request_merger::seen(const round& r, int32_t first, int32_t end) const {
  return std::any_of(r.seen.begin() + (first - first_), r.seen.begin() + (end - first_),
                     [](bool b) { return b; });
}

void request_merger::bound() {
  if (rounds_.size() < max_rounds)
    return;
  for (auto it = rounds_.begin(); it != rounds_.end();)
    it = it->second.request ? std::next(it) : rounds_.erase(it);
}

void request_merger::release(rounds::iterator it, v1::RequestList& up) {
  auto& r = it->second;
  for (const auto& [first, end] : joined_ranges(std::exchange(r.ranges, {}))) {
    send(*r.request, first, end, up);
    ++counts_.passed;
  }
  r.request.reset();
  --held_count_;
}

void request_merger::pass(const v1::Request& req, v1::RequestList& up) {
  *up.add_requests() = req;
  ++counts_.passed;
}

void request_merger::send(const v1::Request& req, int32_t first, int32_t end,
                          v1::RequestList& up) {
  auto& out = *up.add_requests();
  out = req;
  out.set_request_rank(first);
  if (end > first + 1)
    out.set_hit_ranks_end(end);
}

void request_merger::count(rounds::iterator it, int32_t first, int32_t end,
                           v1::RequestList& up) {
  auto& r = it->second;
  std::fill(r.seen.begin() + (first - first_), r.seen.begin() + (end - first_), true);
  r.seen_count += end - first;
  if (r.request)
    r.ranges.emplace_back(first, end);
  if (r.seen_count < end_ - first_)
    return;
  if (r.request) {
    send(*r.request, first_, end_, up);
    ++counts_.merged;
    --held_count_;
  }
  rounds_.erase(it);
}

} // namespace troupe::control
