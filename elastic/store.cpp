#include "elastic/store.hpp"

namespace troupe::elastic {

void store_client::set_many(const std::vector<std::pair<std::string, std::string>>& entries) {
  for (const auto& [key, value] : entries)
    set(key, value);
}

std::string store_client::wait_get(const std::string& key, std::chrono::milliseconds timeout) {
  if (!wait({key}, timeout))
    throw store_error("store " + where() + ": key '" + key + "' did not appear within " +
                      std::to_string(timeout.count()) + " ms");
  if (auto value = get(key))
    return std::move(*value);
  throw store_error("store " + where() + ": get '" + key + "': key vanished after wait");
}

} // namespace troupe::elastic
