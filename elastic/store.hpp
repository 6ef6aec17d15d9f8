#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
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

/// Client of a job's rendezvous store: troupe-run's embedded store
/// (embedded_store.hpp) or an etcd cluster (etcd_store_client.hpp), chosen
/// by store_endpoint (store_endpoint.hpp). Keys and values are arbitrary
/// bytes; a key may carry a lease, after which it disappears unless
/// renewed. `set` makes a key permanent, `add` and `compare_set` keep its
/// lease (as Redis does). Implementations are thread-safe and fail with
/// store_error naming the store and the key(s).
class store_client {
public:
  virtual ~store_client() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;

  /// set() of every entry. The embedded store takes them in one request (a
  /// rank publishing one value per peer pays one round trip, not one per
  /// peer); by default, one set() each.
  virtual void set_many(const std::vector<std::pair<std::string, std::string>>& entries);

  /// Returns the value, or nothing when the key is absent. Never blocks on
  /// the key's presence.
  virtual std::optional<std::string> get(const std::string& key) = 0;

  /// Adds `delta` to the integer stored at `key` (absent = 0) and returns
  /// the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;

  /// Deletes the key; false when it was absent.
  virtual bool remove(const std::string& key) = 0;

  /// Atomically stores `desired` if the key holds `expected` (nothing =
  /// the key is absent, so this creates it).
  virtual compare_set_result compare_set(const std::string& key,
                                         const std::optional<std::string>& expected,
                                         const std::string& desired) = 0;

  /// Keys starting with `prefix`, sorted.
  virtual std::vector<std::string> list(const std::string& prefix) = 0;

  /// Keys starting with `prefix` with their values, sorted by key.
  virtual std::map<std::string, std::string> list_values(const std::string& prefix) = 0;

  /// Stores the key with a lease: it disappears `ttl` from now unless
  /// renewed. `ttl` must lie in (0, 30 days].
  virtual void set_with_lease(const std::string& key, const std::string& value,
                              std::chrono::milliseconds ttl) = 0;

  /// Makes the key expire `ttl` from now (a permanent key gets a lease);
  /// false when it is absent, e.g. its lease already ran out.
  virtual bool renew(const std::string& key, std::chrono::milliseconds ttl) = 0;

  /// Blocks until every key exists at once (an expired key is absent);
  /// false when `timeout` passed first.
  virtual bool wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) = 0;

  /// wait() for one key, then get() it; throws store_error naming the key
  /// on timeout.
  std::string wait_get(const std::string& key, std::chrono::milliseconds timeout);

  /// The store, for error messages: "host:port" or "etcd://host:port".
  virtual std::string where() const = 0;
};

} // namespace troupe::elastic
