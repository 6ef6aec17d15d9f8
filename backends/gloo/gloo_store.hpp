#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "elastic/store.hpp"

namespace troupe::backends {

/// Gloo's rendezvous store interface over the launcher's store, with every
/// key under a prefix so process sets and epochs never collide.
class gloo_store : public gloo::rendezvous::Store {
public:
  gloo_store(std::shared_ptr<elastic::store_client> client, std::string prefix,
             std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

private:
  std::shared_ptr<elastic::store_client> client_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

} // namespace troupe::backends
