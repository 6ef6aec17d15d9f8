#include "elastic/store_exchange.hpp"

#include "elastic/store.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <utility>

namespace troupe::elastic {

namespace {

using std::chrono::milliseconds;

// Slices of a wait that watches for an abandon key: short at first (most
// exchanges complete within milliseconds), then one get() a second.
constexpr milliseconds first_slice{50};
constexpr milliseconds longest_slice{1000};

} // namespace

void arrive_and_wait(store_client& store, const std::string& prefix, int size,
                     milliseconds timeout, const std::optional<std::string>& abandon) {
  const auto all = prefix + "all";
  if (store.add(prefix + "arrived", 1) == size)
    store.set(all, "");
  const auto missing = [&] {
    return "only " + store.get(prefix + "arrived").value_or("0") + " of " +
           std::to_string(size) + " ranks arrived at '" + prefix + "'";
  };
  if (!abandon) {
    if (!store.wait({all}, timeout))
      throw store_error(missing() + " within " + std::to_string(timeout.count()) + " ms");
    return;
  }
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  for (auto slice = first_slice;; slice = std::min(slice * 2, longest_slice)) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
    if (store.wait({all}, std::max(milliseconds{0}, std::min(slice, left))))
      return;
    // Checked after the wait: a rank that finds every other arrived goes
    // on, even when the key appeared meanwhile.
    if (auto why = store.get(*abandon))
      throw exchange_abandoned(missing() + ", and '" + *abandon + "' appeared: " + *why);
    if (clock::now() >= deadline)
      throw store_error(missing() + " within " + std::to_string(timeout.count()) + " ms");
  }
}

std::vector<std::string> gather_published(store_client& store, const std::string& values_prefix,
                                          const std::string& arrival_prefix, int size,
                                          milliseconds timeout,
                                          const std::optional<std::string>& abandon) {
  arrive_and_wait(store, arrival_prefix, size, timeout, abandon);
  auto published = store.list_values(values_prefix);
  std::vector<std::string> values;
  values.reserve(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank) {
    auto it = published.find(values_prefix + std::to_string(rank));
    if (it == published.end())
      throw store_error("rank " + std::to_string(rank) + " arrived at '" + arrival_prefix +
                        "' without a value under '" + values_prefix + "'");
    values.push_back(std::move(it->second));
  }
  return values;
}

namespace {

std::string mailbox(const std::string& prefix, int rank) {
  return prefix + "to/" + std::to_string(rank) + "/";
}

} // namespace

std::vector<std::string> all_to_all(store_client& store, const std::string& prefix, int rank,
                                    int size, const std::vector<std::string>& to_peer,
                                    std::chrono::milliseconds timeout) {
  if (to_peer.size() != static_cast<size_t>(size))
    throw std::invalid_argument("all_to_all: " + std::to_string(to_peer.size()) +
                                " entries for " + std::to_string(size) + " ranks");
  std::vector<std::pair<std::string, std::string>> sent;
  sent.reserve(to_peer.size());
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank && !to_peer[peer].empty())
      sent.emplace_back(mailbox(prefix, peer) + std::to_string(rank), to_peer[peer]);
  if (!sent.empty())
    store.set_many(sent);
  arrive_and_wait(store, prefix, size, timeout);
  const auto box = mailbox(prefix, rank);
  std::vector<std::string> received(to_peer.size());
  std::vector<bool> seen(to_peer.size());
  for (auto& [key, value] : store.list_values(box)) {
    int from = -1;
    const auto* begin = key.data() + box.size();
    const auto* end = key.data() + key.size();
    auto [stop, ec] = std::from_chars(begin, end, from);
    if (ec != std::errc{} || stop != end || from < 0 || from >= size || from == rank ||
        seen[from])
      throw store_error("unexpected key '" + key + "' in the exchange under '" + prefix + "'");
    seen[from] = true;
    received[from] = std::move(value);
  }
  return received;
}

} // namespace troupe::elastic
