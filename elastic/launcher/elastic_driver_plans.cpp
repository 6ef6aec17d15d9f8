// elastic_driver's membership plans: the one an earlier try stored, writing
// the next once, adopting it, and which members of the current epoch survive
// into it. The rounds that decide when (elastic_driver.cpp) call these.
#include "elastic/launcher/elastic_driver.hpp"

#include "elastic/launcher/seat_assignment.hpp"
#include "elastic/membership_epoch.hpp"
#include "elastic/store.hpp"

#include <algorithm>
#include <stdexcept>

namespace troupe::elastic::launcher {

namespace {

std::string ids_text(const membership_plan& plan) {
  std::string out;
  for (const auto& m : plan)
    out += (out.empty() ? "" : " ") + std::to_string(m.worker_id) + "@" + m.host;
  return out;
}

// The plan an earlier try stored under `key` (compare_set's `current`).
membership_plan stored_plan(const store_client& store, const std::string& key,
                            const std::optional<std::string>& text) {
  std::string why = "empty or absent";
  try {
    auto plan = decode_plan(text.value_or(""));
    if (!plan.empty())
      return plan;
  } catch (const std::invalid_argument& e) {
    why = e.what();
  }
  throw store_error("store " + store.where() + ": key '" + key +
                    "' holds no membership plan: " + why);
}

} // namespace

std::optional<membership_plan> elastic_driver::stored_next_plan() {
  const auto key = plan_key(s_.job.job_id, epoch_ + 1);
  const auto text = store_.get(key);
  if (!text)
    return std::nullopt;
  return stored_plan(store_, key, text);
}

bool elastic_driver::carries_a_survivor(const membership_plan& plan) const {
  return std::any_of(plan.begin(), plan.end(), [&](const auto& m) {
    const auto it = members_.find(m.worker_id);
    return it != members_.end() && !it->second.departed;
  });
}

void elastic_driver::end_without_survivors() {
  // Nobody is left to train or to sync state from: the job is over.
  slots_deadline_.reset();
  if (failure_code_)
    stop_job("every worker of membership epoch " + std::to_string(epoch_) +
               " has exited; one failed, so the job failed",
             *failure_code_);
  else
    supervisor_.abort(0);
}

void elastic_driver::write_plan(membership_plan& plan, clock::time_point now) {
  const int64_t next = epoch_ + 1;
  // Before the plan: the ranks that join it read the states that led to it.
  share_host_states(now);
  if (next > 0)
    tell_barrier(next, "membership epoch " + std::to_string(next) + " is planned");
  auto id = next_worker_id_;
  for (auto& m : plan)
    if (m.worker_id == new_seat)
      m.worker_id = id++;
  // Written once: an earlier try whose reply was lost (the store failed
  // after storing) may have stored another plan, and workers may have read
  // it; that one stands, whatever the hosts did since.
  const auto key = plan_key(s_.job.job_id, next);
  const auto stored = store_.compare_set(key, std::nullopt, encode_plan(plan));
  if (!stored.swapped)
    plan = stored_plan(store_, key, stored.current);
  // A retry writes the same epoch again: it names only this plan.
  store_.set(epoch_key(s_.job.job_id), std::to_string(next));
  for (const auto& m : plan)
    next_worker_id_ = std::max(next_worker_id_, m.worker_id + 1);
}

void elastic_driver::adopt(membership_plan plan, clock::time_point now) {
  const int64_t next = epoch_ + 1;
  // Members without a seat read the plan and exit 0; one that lingers is
  // killed once the reset timeout has passed.
  for (const auto& [id, m] : members_)
    if (!m.departed && std::none_of(plan.begin(), plan.end(),
                                    [id = id](const auto& p) { return p.worker_id == id; }))
      kill_at_.emplace_back(id, now + s_.reset_timeout);
  // A survivor that exited after an earlier try stored this plan stays
  // gone; its peers cannot start the epoch without it, so the next
  // epoch's barrier opens at once.
  std::map<int64_t, member> seated;
  bool gone = false;
  for (const auto& m : plan) {
    const auto it = members_.find(m.worker_id);
    const bool departed = it != members_.end() && it->second.departed;
    seated[m.worker_id] = member{m.host, departed};
    gone = gone || departed;
  }
  const auto slots = slots_of(plan);
  std::vector<size_t> fresh;
  for (size_t i = 0; i < plan.size(); ++i)
    if (members_.count(plan[i].worker_id) == 0)
      fresh.push_back(i);
  members_ = std::move(seated);
  plan_ = std::move(plan);
  epoch_ = next;
  failure_code_.reset();
  settled_ = false;
  if (observe_.published)
    observe_.published(epoch_, static_cast<int>(plan_.size()));
  report_("troupe-run: membership epoch " + std::to_string(epoch_) + ": " +
          std::to_string(plan_.size()) + " worker(s), rank order " + ids_text(plan_) + "\n");
  for (auto i : fresh)
    spawn(plan_[i], slots[i], static_cast<int>(plan_.size()), now);
  if (gone)
    open_barrier(now, "peer_lost", "a member exited before its epoch was published");
}

membership_plan elastic_driver::survivors() const {
  membership_plan out;
  for (const auto& m : plan_)
    if (!members_.at(m.worker_id).departed)
      out.push_back(m);
  return out;
}

} // namespace troupe::elastic::launcher
