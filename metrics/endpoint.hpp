#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace prometheus {
class Registry;
class Exposer;
} // namespace prometheus

namespace troupe::metrics {

/// The endpoint could not be started (address in use, bad address).
class endpoint_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Serves `GET /metrics` from one registry through prometheus-cpp's Exposer
/// (civetweb, its own threads, so a scrape never waits for an actor and
/// an actor never waits for a scrape). Stopping (destructor) closes the
/// listening socket, so the port can be bound again at once.
class endpoint {
public:
  /// civetweb threads; each open connection holds one.
  static constexpr int server_threads = 16;
  /// Bound on each network read or write of a request, and on an idle
  /// keep-alive connection.
  static constexpr std::chrono::milliseconds request_timeout{1000};

  /// Serves `metrics` on `address:port` (port 0 = any free port). Throws
  /// endpoint_error naming the address when the socket cannot be bound.
  endpoint(const std::string& address, uint16_t port,
           const std::shared_ptr<prometheus::Registry>& metrics);
  ~endpoint();

  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;

  /// The port actually bound.
  uint16_t port() const {
    return port_;
  }

private:
  std::string address_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  uint16_t port_ = 0;
};

} // namespace troupe::metrics
