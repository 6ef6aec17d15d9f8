#include "backends/gloo/gloo_store.hpp"

namespace troupe::backends {

gloo_store::gloo_store(std::shared_ptr<elastic::store_client> client,
                       std::string prefix, std::chrono::milliseconds timeout)
  : client_(std::move(client)), prefix_(std::move(prefix)), timeout_(timeout) {
}

void gloo_store::set(const std::string& key, const std::vector<char>& data) {
  client_->set(prefix_ + key, std::string(data.begin(), data.end()));
}

// Gloo expects get() to wait for the key, as its own stores do.
std::vector<char> gloo_store::get(const std::string& key) {
  auto value = client_->wait_get(prefix_ + key, timeout_);
  return {value.begin(), value.end()};
}

void gloo_store::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void gloo_store::wait(const std::vector<std::string>& keys,
                      const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys)
    full.push_back(prefix_ + k);
  if (!client_->wait(full, timeout))
    throw elastic::store_error("Gloo rendezvous: keys under '" + prefix_ +
                               "' did not appear within " +
                               std::to_string(timeout.count()) + " ms");
}

} // namespace troupe::backends
