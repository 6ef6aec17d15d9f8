#include "control/hit_aggregator.hpp"

#include <algorithm>

#include "proto/request_parameters.hpp"

namespace troupe::control {

hit_aggregator::hit_aggregator(tree_node node, clock::duration hold, name_lookup name_of)
  : node_(std::move(node)), hold_(hold), name_of_(std::move(name_of)),
    merger_(node_.rank, node_.end, hold), applied_(node_.children.size() + 1, 0) {
}

size_t hit_aggregator::sender_slot(int32_t rank) const {
  const auto pos = std::upper_bound(node_.children.begin(), node_.children.end(), rank);
  return static_cast<size_t>(pos - node_.children.begin());
}

void hit_aggregator::add(const v1::RequestList& list, clock::time_point now) {
  if (list.has_tuning())
    out_.mutable_tuning()->MergeFrom(list.tuning());
  if (list.has_restored())
    out_.mutable_restored()->MergeFrom(list.restored());
  const int32_t sender = list.ranks_end() > 0       ? list.sender_rank()
                         : list.requests_size() > 0 ? list.requests(0).request_rank()
                                                    : -1;
  if (sender >= node_.rank && sender < node_.end) {
    auto& a = applied_[sender_slot(sender)];
    a = std::max(a, list.lists_applied());
  }
  for (const auto& req : list.requests()) {
    if (req.cache_id() != 0) {
      hit(req, list.lists_applied(), now);
      continue;
    }
    // A full request may be the changed parameters (or the lagging
    // member's view) that held hits of the same tensor wait for in vain, or
    // a join that every held hit waits for: the coordinator sees those now.
    const bool join = req.op() == v1::OP_TYPE_JOIN;
    joined_ = joined_ || join;
    if (!join && name_of_) {
      // Hits of this round of the tensor, held or still to come, cannot
      // complete here either (they name a list before the sender's state).
      if (missed_.size() >= max_missed)
        missed_.clear();  // forgetting only delays: held hits wait for the hold
      auto& state = missed_[req.tensor_name()];
      state = std::max(state, list.lists_applied());
    }
    // (release() counts the released hits in the merger's rounds.)
    bool unknown = false;
    for (auto it = held_.begin(); it != held_.end();) {
      if (join || !it->second.name || *it->second.name == req.tensor_name()) {
        unknown = unknown || !it->second.name;
        release(it->first, it->second);
        forget(it++);
      } else {
        ++it;
      }
    }
    if (join) {
      merger_.release_all(out_);
      *out_.add_requests() = req;
    } else if (joined_) {
      *out_.add_requests() = req;  // no round completes while a rank has joined
    } else {
      // Hits the node cannot name were held: they may be this round's, so
      // it goes up as it comes.
      if (unknown)
        merger_.mixed(req.tensor_name(), out_);
      merger_.add(req, now, out_);
    }
  }
}

bool hit_aggregator::answered(const v1::ResponseList& list) {
  if (merger_.idle())
    return false;  // the steady state: everything cached
  const int before = out_.requests_size();
  for (const auto& resp : list.responses())
    for (const auto& name : resp.tensor_names())
      merger_.answered(name, out_);
  return out_.requests_size() > before;
}

void hit_aggregator::hit(const v1::Request& req, uint64_t lists_applied, clock::time_point now) {
  const key k{req.cache_id(), req.cache_list() > 0 ? req.cache_list() : lists_applied};
  const int32_t first = req.request_rank();
  const int64_t end64 = ranks_end(req);
  auto direct = direct_.find(k.first);
  if (direct != direct_.end() && direct->second != k.second) {
    direct_.erase(direct);  // a new round of the id
    direct = direct_.end();
  }
  if (first < node_.rank || end64 > node_.end || end64 <= first)
    return pass_up(req, k, static_cast<int32_t>(end64));  // the coordinator names the error
  const auto end = static_cast<int32_t>(end64);
  if (joined_)
    return pass_up(req, k, end);  // (full requests pass too: the merger waits for nothing)
  auto held = held_.find(k);
  // The tensor's name: the held key's (not copied: hits are the hot path),
  // or looked up for a new key.
  std::optional<std::string> looked_up;
  const std::string* name = nullptr;
  if (held != held_.end()) {
    name = held->second.name ? &*held->second.name : nullptr;
  } else if (name_of_) {
    if (const auto* known = name_of_(k.first, k.second))
      looked_up = *known;
    name = looked_up ? &*looked_up : nullptr;
  }
  // Full requests of this tensor's round, if held, cannot complete.
  if (!merger_.idle())
    merger_.arrived(name, out_);
  const auto up_as_it_came = [&] {
    if (name)
      merger_.hits(*name, first, end, out_);
    pass_up(req, k, end);
  };
  if (direct != direct_.end())
    return up_as_it_came();
  if (held == held_.end() && name) {
    auto missed = missed_.find(*name);
    if (missed != missed_.end() && k.second <= missed->second) {
      // A rank of the subtree sent this round of it in full: up as it comes.
      direct_[k.first] = k.second;
      return up_as_it_came();
    }
  }
  const bool fresh = held == held_.end();
  if (fresh)
    held = held_.try_emplace(k).first;
  auto& p = held->second;
  if (fresh) {
    p.since = now;
    p.name = std::move(looked_up);
    name = p.name ? &*p.name : nullptr;
    order_.emplace_back(now, k);
    p.progress = lists_applied;
    held_progress_.insert(p.progress);
  } else if (lists_applied < p.progress) {
    held_progress_.erase(held_progress_.find(p.progress));
    p.progress = lists_applied;
    held_progress_.insert(p.progress);
  }
  // A rank counted twice (only a broken peer sends that) would make the
  // range look complete: everything goes up as it came, for the
  // coordinator to name the rank that asked twice.
  if (std::any_of(p.ranges.begin(), p.ranges.end(),
                  [&](const auto& r) { return r.first < end && first < r.second; })) {
    looked_up = p.name;  // p goes
    name = looked_up ? &*looked_up : nullptr;
    release(k, p);
    forget(held);
    return up_as_it_came();
  }
  p.ranges.emplace_back(first, end);
  p.count += end - first;
  if (p.count < node_.end - node_.rank)
    return;
  send_hit(k, node_.rank, node_.end);
  ++counts_.aggregated;
  if (p.name && !merger_.idle() && merger_.has(*p.name))
    merger_.hits(*p.name, node_.rank, node_.end, out_);
  forget(held);
}

void hit_aggregator::forget(std::map<key, pending>::iterator it) {
  held_progress_.erase(held_progress_.find(it->second.progress));
  held_.erase(it);
}

void hit_aggregator::pass_up(const v1::Request& req, const key& k, int32_t end) {
  auto* up = out_.add_requests();
  *up = req;
  up->set_cache_list(k.second);
  up->set_hit_ranks_end(end);
  ++counts_.passed;
}

void hit_aggregator::send_hit(const key& k, int32_t first, int32_t end) {
  auto& up = *out_.add_requests();
  up.set_cache_id(k.first);
  up.set_cache_list(k.second);
  up.set_request_rank(first);
  up.set_hit_ranks_end(end);
}

void hit_aggregator::release(const key& k, pending& p) {
  p.ranges = joined_ranges(std::move(p.ranges));
  for (const auto& [first, end] : p.ranges) {
    send_hit(k, first, end);
    ++counts_.passed;
  }
  direct_[k.first] = k.second;
  // The merger's round of the tensor has seen these ranks.
  if (!p.name)
    merger_.release_all(out_);
  else
    for (const auto& [first, end] : p.ranges)
      merger_.hits(*p.name, first, end, out_);
}

std::optional<v1::RequestList> hit_aggregator::take(clock::time_point now) {
  while (!order_.empty()) {
    const auto [since, k] = order_.front();
    auto it = held_.find(k);
    if (it != held_.end() && it->second.since == since) {
      if (now - since < hold_)
        break;  // the oldest held key is not due: none is
      ++counts_.expired;
      if (!late_)
        late_ = late_round{it->second.name ? *it->second.name
                                           : "cache id " + std::to_string(k.first),
                           missing_ranges(node_.rank, node_.end, it->second.ranges)};
      release(k, it->second);
      forget(it);
    }
    order_.pop_front();
  }
  merger_.release_due(now, out_);
  if (out_.requests_size() == 0 && !out_.has_tuning() && !out_.has_restored())
    return std::nullopt;
  v1::RequestList list = std::move(out_);
  out_.Clear();
  list.set_sender_rank(node_.rank);
  list.set_ranks_end(node_.end);
  list.set_lists_applied(progress());
  return list;
}

std::optional<late_round> hit_aggregator::take_late() {
  auto merged = merger_.take_late();
  return late_ ? std::exchange(late_, std::nullopt) : merged;
}

uint64_t hit_aggregator::progress() const {
  // A held hit was resolved against its sender's state then: the
  // coordinator must keep that state until the hit has gone up. (Hits in
  // the same list are resolved before the list's progress is recorded.)
  const auto least = *std::min_element(applied_.begin(), applied_.end());
  return held_progress_.empty() ? least : std::min(least, *held_progress_.begin());
}

std::optional<hit_aggregator::clock::time_point> hit_aggregator::next_deadline() const {
  auto next = merger_.next_deadline();
  for (const auto& [since, k] : order_) {
    auto it = held_.find(k);
    if (it != held_.end() && it->second.since == since)
      return next ? std::min(*next, since + hold_) : since + hold_;
  }
  return next;
}

} // namespace troupe::control
