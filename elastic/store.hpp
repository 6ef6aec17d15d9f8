#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace troupe::elastic {

/// A store operation failed: connection lost, malformed reply, or a wait
/// that ran past its deadline. The message names the key(s) involved.
class store_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Outcome of store_client::compare_set.
struct compare_set_result {
  bool swapped = false;
  /// The value stored after the call (the desired one when swapped), or
  /// nothing when the key is absent; a caller that lost retries from it.
  std::optional<std::string> current;
};

/// Client of the launcher's rendezvous store. Keys and values are arbitrary
/// bytes; a key may carry a lease, after which it disappears unless renewed.
/// `set` makes a key permanent, `add` and `compare_set` keep its lease (as
/// Redis does). Thread-safe: calls are serialised over one TCP connection.
/// Every request and reply is authenticated with the job's secret (see
/// store_protocol.hpp).
class store_client {
public:
  /// Connects and authenticates, retrying refused connections until
  /// `connect_timeout` has passed. A store that does not accept `secret`
  /// fails at once.
  store_client(std::string host, uint16_t port, const std::string& secret,
               std::chrono::milliseconds connect_timeout);
  ~store_client();

  store_client(const store_client&) = delete;
  store_client& operator=(const store_client&) = delete;

  void set(const std::string& key, const std::string& value);

  /// set() of every entry, in one request: a rank publishing one value per
  /// peer pays one round trip, not one per peer.
  void set_many(const std::vector<std::pair<std::string, std::string>>& entries);

  /// Returns the value, or nothing when the key is absent. Never blocks on
  /// the key's presence.
  std::optional<std::string> get(const std::string& key);

  /// Adds `delta` to the integer stored at `key` (absent = 0) and returns
  /// the new value.
  int64_t add(const std::string& key, int64_t delta);

  /// Deletes the key; false when it was absent.
  bool remove(const std::string& key);

  /// Atomically stores `desired` if the key holds `expected` (nothing =
  /// the key is absent, so this creates it).
  compare_set_result compare_set(const std::string& key,
                                 const std::optional<std::string>& expected,
                                 const std::string& desired);

  /// Keys starting with `prefix`, sorted.
  std::vector<std::string> list(const std::string& prefix);

  /// Keys starting with `prefix` with their values, sorted by key.
  std::map<std::string, std::string> list_values(const std::string& prefix);

  /// Stores the key with a lease: it disappears `ttl` from now unless
  /// renewed. `ttl` must lie in (0, 30 days].
  void set_with_lease(const std::string& key, const std::string& value,
                      std::chrono::milliseconds ttl);

  /// Makes the key expire `ttl` from now (a permanent key gets a lease);
  /// false when it is absent, e.g. its lease already ran out.
  bool renew(const std::string& key, std::chrono::milliseconds ttl);

  /// Blocks until every key exists at once (an expired key is absent);
  /// false when `timeout` passed first.
  bool wait(const std::vector<std::string>& keys,
            std::chrono::milliseconds timeout);

  /// wait() for one key, then get() it; throws store_error naming the key
  /// on timeout.
  std::string wait_get(const std::string& key,
                       std::chrono::milliseconds timeout);

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
  /// store_error naming `what`. Defined in store_client.cpp, the only user.
  template <class Read, class Encode, class... Fields>
  auto call(const std::string& what, std::chrono::milliseconds deadline,
            Read read, Encode encode, const Fields&... fields);

  /// Reads the greeting and says hello; throws store_error.
  void authenticate(std::chrono::milliseconds deadline);

  /// "host:port" of the store, for error messages.
  std::string where() const;
  store_error failure(const std::string& what, const std::string& why) const;

  std::string host_;
  uint16_t port_;
  int fd_ = -1;
  std::mutex mtx_;
  std::string key_;    // derived from the job's secret
  std::string nonce_;  // from the server's greeting
  uint64_t requests_sent_ = 0;
  uint64_t replies_read_ = 0;
};

/// What one store server holds at most. A client over a limit is refused
/// or made to wait, never buffered without bound.
struct store_limits {
  /// Connections at once; more are closed as soon as they are accepted.
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
};

/// The store itself, served on a background thread by the launcher (and by
/// tests). Keys and values are arbitrary bytes.
class store_server {
public:
  /// Listens on `bind_host`:`port` (0 = any free port) and serves clients
  /// that hold `secret`.
  store_server(const std::string& bind_host, uint16_t port, const std::string& secret,
               store_limits limits = {});
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
