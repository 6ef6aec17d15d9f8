#include "elastic/membership_epoch.hpp"

#include <charconv>

namespace troupe::elastic {

namespace {

int64_t parse_epoch(const std::optional<std::string>& text,
                    const std::string& key) {
  if (!text)
    return 0;
  int64_t value = 0;
  auto end = text->data() + text->size();
  auto [last, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc{} || last != end || value < 0)
    throw store_error("store: value of key '" + key
                      + "' is not an epoch: '" + *text + "'");
  return value;
}

std::optional<std::string> epoch_text(int64_t epoch) {
  // Epoch 0 is the absent key, so the first advance creates it.
  if (epoch == 0)
    return std::nullopt;
  return std::to_string(epoch);
}

} // namespace

std::string epoch_key(const std::string& job) {
  return job + "/epoch";
}

int64_t epoch(store_client& store, const std::string& job) {
  auto key = epoch_key(job);
  return parse_epoch(store.get(key), key);
}

epoch_advance advance_epoch(store_client& store, const std::string& job,
                            int64_t expected_current) {
  auto key = epoch_key(job);
  auto result = store.compare_set(key, epoch_text(expected_current),
                                  std::to_string(expected_current + 1));
  return {result.swapped, parse_epoch(result.current, key)};
}

} // namespace troupe::elastic
