#include "coordinator/stall_inspector.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace troupe::coordinator {

namespace {

stall_inspector::clock::duration seconds(double s) {
  return std::chrono::duration_cast<stall_inspector::clock::duration>(
    std::chrono::duration<double>(s));
}

} // namespace

stall_inspector::stall_inspector(stall_options opts) : opts_(opts) {
}

std::chrono::milliseconds stall_inspector::interval() const {
  const double shortest = opts_.shutdown_seconds > 0
                            ? std::min(opts_.warning_seconds, opts_.shutdown_seconds)
                            : opts_.warning_seconds;
  const auto ms = static_cast<int64_t>(shortest * 1000 / 4);
  return std::chrono::milliseconds(std::clamp<int64_t>(ms, 50, 5000));
}

stall_inspector::verdict stall_inspector::check(const message_table& table,
                                                clock::time_point now) {
  verdict out;
  if (!opts_.enabled)
    return out;
  auto waiting = table.missing_ranks(now - seconds(opts_.warning_seconds));
  // Forget tensors that completed, so a later stall of the same name warns.
  std::set<std::string> still;
  for (const auto& w : waiting)
    still.insert(w.first);
  for (auto it = warned_.begin(); it != warned_.end();)
    it = still.count(*it) ? std::next(it) : warned_.erase(it);
  stalled fresh;
  for (const auto& w : waiting)
    if (warned_.insert(w.first).second)
      fresh.push_back(w);
  if (!fresh.empty())
    out.warning = describe(fresh);
  if (opts_.shutdown_seconds > 0)
    out.to_fail = table.missing_ranks(now - seconds(opts_.shutdown_seconds));
  return out;
}

std::string stall_inspector::describe(const stalled& tensors) const {
  std::map<int32_t, std::vector<std::string>> by_rank;
  for (const auto& [name, ranks] : tensors)
    for (auto r : ranks)
      by_rank[r].push_back(name);
  std::string out = fmt::format(
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
    "ranks and are waiting for remainder of ranks for more than {} seconds. This may "
    "indicate that different ranks are trying to submit different tensors or that only "
    "subset of ranks is submitting tensors, which will cause deadlock.\nMissing ranks:",
    opts_.warning_seconds);
  for (auto& [rank, names] : by_rank) {
    std::sort(names.begin(), names.end());
    out += fmt::format("\n{}: [", rank);
    for (size_t i = 0; i < names.size() && i < 6; ++i)
      out += (i ? ", " : "") + names[i];
    out += names.size() > 6 ? " ...]" : "]";
  }
  return out;
}

} // namespace troupe::coordinator
