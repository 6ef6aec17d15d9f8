#pragma once

#include "elastic/store.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

// troupe-run's own rendezvous store, the default: a server on a background
// thread of troupe-run and its client, speaking store_protocol.hpp.
namespace troupe::elastic {

/// Client of troupe-run's embedded store. Thread-safe: calls are serialised
/// over one TCP connection. Every request and reply is authenticated with
/// the job's secret (see store_protocol.hpp).
class embedded_store_client final : public store_client {
public:
  /// Connects and authenticates, retrying refused connections until
  /// `connect_timeout` has passed. A store that does not accept `secret`
  /// fails at once.
  embedded_store_client(std::string host, uint16_t port, const std::string& secret,
                        std::chrono::milliseconds connect_timeout);
  ~embedded_store_client() override;

  embedded_store_client(const embedded_store_client&) = delete;
  embedded_store_client& operator=(const embedded_store_client&) = delete;

  void set(const std::string& key, const std::string& value) override;
  void set_many(const std::vector<std::pair<std::string, std::string>>& entries) override;
  std::optional<std::string> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool remove(const std::string& key) override;
  compare_set_result compare_set(const std::string& key,
                                 const std::optional<std::string>& expected,
                                 const std::string& desired) override;
  std::vector<std::string> list(const std::string& prefix) override;
  std::map<std::string, std::string> list_values(const std::string& prefix) override;
  void set_with_lease(const std::string& key, const std::string& value,
                      std::chrono::milliseconds ttl) override;
  bool renew(const std::string& key, std::chrono::milliseconds ttl) override;
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  /// "host:port".
  std::string where() const override;

  /// The connection's socket, for a caller that polls for its end (the
  /// store closing it) while no request is in flight; -1 once a failed
  /// request closed it. Never read or written by the caller.
  int native_handle() const { return fd_; }

private:
  /// Sends one request frame and returns the reply body. `what` names the
  /// operation and key(s) for error messages.
  std::string request(const std::string& frame,
                      std::chrono::milliseconds deadline,
                      const std::string& what);

  /// Sends `encode(fields...)`, then `read(status, reply)` decodes the
  /// reply. A request too large to encode, a refusal by the server, a
  /// status `read` rejects (protocol_error) or a malformed reply becomes a
  /// store_error naming `what`. Defined in embedded_store_client.cpp, the
  /// only user.
  template <class Read, class Encode, class... Fields>
  auto call(const std::string& what, std::chrono::milliseconds deadline,
            Read read, Encode encode, const Fields&... fields);

  /// Reads the greeting and says hello; throws store_error.
  void authenticate(std::chrono::milliseconds deadline);

  store_error failure(const std::string& what, const std::string& why) const;

  std::string host_;
  uint16_t port_;
  int fd_ = -1;
  std::mutex mtx_;
  std::string key_;    // derived from the job's secret
  std::string nonce_;  // the server's greeting's, then with this client's after hello
  std::string hello_nonce_;  // this client's, joining nonce_ once the hello is sent
  uint64_t requests_sent_ = 0;
  uint64_t replies_read_ = 0;
};

/// What one store server holds at most. A client over a limit is refused
/// or made to wait, never buffered without bound.
/// Store connections each rank holds for its whole life: its client, its
/// rendezvous client and its launcher watch (workers/runtime.cpp).
constexpr size_t store_connections_per_rank = 3;

struct store_limits {
  /// Connections at once; more are closed as soon as they are accepted,
  /// with a warning (refusal_warning_interval).
  size_t max_connections = 1024;
  /// Input bytes all connections may buffer beyond a small allowance each
  /// (64 KiB): a frame larger than that waits, unread, until it fits. At
  /// least one largest frame (64 MiB and a tag).
  size_t input_budget = size_t{128} << 20;
  /// Replies waiting to be sent, all connections together; above it no
  /// new request is served until readers catch up. A connection serves its
  /// next request only once its own output is below 64 KiB.
  size_t output_budget = size_t{128} << 20;
  /// A client whose pending output does not move for this long is dropped.
  std::chrono::milliseconds slow_reader_timeout{10'000};
  /// A connection that has not authenticated within this is dropped.
  std::chrono::milliseconds hello_timeout{10'000};
  /// Connections closed at max_connections are warned about at once, then
  /// at most this often, with their count since the last warning.
  std::chrono::milliseconds refusal_warning_interval{5'000};
};

/// The store itself, served on a background thread by the launcher (and by
/// tests). Keys and values are arbitrary bytes.
class store_server {
public:
  /// Where the server's warnings go, called on its thread; by default a
  /// "troupe-run: warning:" line on stderr.
  using warning_sink = std::function<void(const std::string&)>;

  /// Listens on `bind_host`:`port` (0 = any free port) and serves clients
  /// that hold `secret`.
  store_server(const std::string& bind_host, uint16_t port, const std::string& secret,
               store_limits limits = {}, warning_sink warn = {});
  ~store_server();

  store_server(const store_server&) = delete;
  store_server& operator=(const store_server&) = delete;

  uint16_t port() const {
    return port_;
  }

private:
  struct impl;
  std::unique_ptr<impl> impl_;
  uint16_t port_ = 0;
};

} // namespace troupe::elastic
