#pragma once

// How ranks' actor systems reach each other: mutually authenticated TLS
// (CAF's OpenSSL module) by default, plain TCP only when asked for. Included
// from runtime.cpp only (CAF headers).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/expected.hpp>
#include <caf/io/middleman_actor.hpp>

#include "backends/registry.hpp"
#include "workers/config.hpp"
#include "workers/identity.hpp"
#include "workers/tls_credentials.hpp"

namespace troupe::workers {

/// The job's secret as this rank finds it: troupe-run's (inherited
/// descriptor), else under a plain mpirun what the ranks agree on over MPI
/// (TROUPE_SECRET_KEY, the same on every rank, or one that rank 0 draws;
/// secret_agreement.hpp), else TROUPE_SECRET_KEY, else (a job of one) a
/// fresh one. Empty when a store client has none to use: the caller
/// reports that. Throws std::runtime_error when the descriptor cannot be
/// read, config_error when the ranks of an mpirun were given different
/// keys or a key on some ranks only.
std::string job_secret(const env_lookup& env, const config& cfg, const identity& id,
                       const std::optional<backends::external_launch>& launch);

class control_plane {
public:
  /// TLS with the credentials of `cfg`'s files or derived from `secret`,
  /// or plain TCP when cfg.insecure_control_plane. Throws tls_error.
  control_plane(const config& cfg, const std::string& secret);

  bool encrypted() const {
    return credentials_.has_value();
  }

  /// Loads the middleman and, for TLS, CAF's OpenSSL module with this
  /// rank's certificate, key and trusted CAs: a peer must present a
  /// certificate signed by them, both ways, before any BASP message.
  void configure(caf::actor_system_config& cfg) const;

  /// The middleman actor that opens and makes this rank's connections:
  /// for TLS a tls_middleman (see tls_middleman.hpp), whose TCP handshake
  /// ends at the start timeout, else CAF's own (its connect blocks until
  /// the kernel gives up on an address that never answers).
  caf::io::middleman_actor start(caf::actor_system& sys) const;

  /// Undoes start(); `connections` is empty afterwards.
  void stop(caf::actor_system& sys, caf::io::middleman_actor& connections) const;

  /// Publishes `whom` on an ephemeral port of `address` only, waiting for
  /// the middleman actor at most the start timeout (at start-up nothing
  /// else keeps it busy, but no wait is without a deadline). Undone with the
  /// middleman's unpublish either way: both middleman actors share its BASP
  /// broker.
  caf::expected<uint16_t> publish(const caf::io::middleman_actor& connections,
                                  const caf::actor& whom, const std::string& address) const;

  /// Connects to the actor published at host:port, waiting `timeout` at
  /// most (a blackholed address takes the kernel's SYN retries, about
  /// 130 s, far past the start deadline).
  static caf::expected<caf::actor> connect(const caf::io::middleman_actor& connections,
                                           caf::actor_system& sys, const std::string& host,
                                           uint16_t port, std::chrono::milliseconds timeout);

private:
  std::optional<tls_credentials> credentials_;
  // How long the TLS middleman's TCP handshake may take (the start
  // timeout): the stock one blocks in the kernel's SYN retries.
  std::chrono::milliseconds connect_timeout_;
};

} // namespace troupe::workers
