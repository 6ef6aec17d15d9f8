#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace troupe::metrics {

/// The endpoint could not be started (address in use, bad address).
class http_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Serves `GET /metrics` (and HEAD) with whatever `render` returns, as the
/// Prometheus text format 0.0.4; 404 for other paths, 405 for other
/// methods. Runs on civetweb's own threads, so a scrape never waits for
/// an actor and an actor never waits for a scrape. Stopping (destructor)
/// closes the listening socket, so the port can be bound again at once.
class http_server {
public:
  using renderer = std::function<std::string()>;

  /// Listens on `address:port` (port 0 = any free port). Throws http_error
  /// naming the address when the socket cannot be bound.
  http_server(const std::string& address, uint16_t port, renderer render);
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// The port actually bound.
  uint16_t port() const {
    return port_;
  }

private:
  struct impl;
  std::unique_ptr<impl> impl_;
  uint16_t port_ = 0;
};

} // namespace troupe::metrics
