#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace troupe::elastic {

class store_client;

/// Where a job's rendezvous store is: troupe-run's embedded store (the
/// default; its address comes from TROUPE_STORE_ADDR / TROUPE_STORE_PORT),
/// or an etcd cluster given by TROUPE_RENDEZVOUS / `--rendezvous`.
struct store_endpoint {
  enum class backend { embedded, etcd };
  backend kind = backend::embedded;
  std::string host;
  uint16_t port = 0;
  /// etcd: prepended to every key, so jobs share a cluster with other users.
  std::string prefix;

  /// Whether there is a store at all (a job of one has none).
  bool known() const {
    return port != 0;
  }

  /// "host:port" (embedded) or "etcd://host:port/prefix".
  std::string describe() const;
};

/// Key prefix of an etcd URL without a path.
constexpr const char* default_etcd_prefix = "troupe/";

/// Parses `--rendezvous` / TROUPE_RENDEZVOUS: "etcd://HOST:PORT[/PREFIX]"
/// (HOST a name, an IPv4 address or a bracketed IPv6 one; PREFIX defaults
/// to "troupe/"). Throws std::invalid_argument saying what is wrong.
store_endpoint parse_rendezvous(const std::string& url);

/// A client of the store at `where`, connected (retrying refused
/// connections until `timeout`) and, for the embedded store, authenticated
/// with the job's `secret`; an etcd client seals values with it
/// (etcd_store_client.hpp). Throws store_error.
std::unique_ptr<store_client> connect_store(const store_endpoint& where,
                                            const std::string& secret,
                                            std::chrono::milliseconds timeout);

} // namespace troupe::elastic
