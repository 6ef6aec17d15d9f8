#pragma once

#include "elastic/store.hpp"
#include "elastic/store_endpoint.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace troupe::elastic {

/// The rendezvous store kept in an etcd cluster (3.4 or later) through its
/// v3 HTTP/JSON gateway, for jobs whose rendezvous should not live in one
/// troupe-run (`--rendezvous etcd://HOST:PORT[/PREFIX]`). Every key gets
/// the endpoint's prefix. Thread-safe: calls share one HTTP connection,
/// one request at a time; wait() polls (2 ms, doubling up to 50 ms) and
/// holds the connection only during each poll.
///
/// etcd has no notion of the job's secret, so values are sealed instead:
/// each is stored as HMAC-SHA256(key derived from the secret, key and
/// value) followed by the value, and a value whose tag does not match is a
/// store_error. Whoever can write to etcd but lacks the secret therefore
/// cannot forge or alter a value (redirect a rank to another address, change
/// a plan); they can still read values (hosts, addresses, plans: nothing
/// secret), delete keys or put back a value a key held before, which stalls
/// or fails a job but does not hand it to them. Protect the cluster with
/// etcd's own authentication and TLS where that matters; this client speaks
/// plain HTTP without etcd credentials.
///
/// Leases are whole seconds in etcd: a ttl is rounded up to seconds, and
/// etcd raises it to its minimum (about 2 s with default flags).
class etcd_store_client final : public store_client {
public:
  /// Reaches the gateway (retrying until `connect_timeout`); throws
  /// store_error naming the endpoint and the last failure.
  etcd_store_client(store_endpoint where, const std::string& secret,
                    std::chrono::milliseconds connect_timeout);
  ~etcd_store_client() override;

  etcd_store_client(const etcd_store_client&) = delete;
  etcd_store_client& operator=(const etcd_store_client&) = delete;

  void set(const std::string& key, const std::string& value) override;
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
  /// "etcd://host:port/prefix".
  std::string where() const override;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::elastic
