#include "workers/control_plane.hpp"

#include <algorithm>

#include <caf/function_view.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "workers/secret_agreement.hpp"
#include "workers/tls_middleman.hpp"

#include "elastic/job_secret.hpp"

namespace troupe::workers {

std::string job_secret(const env_lookup& env, const config& cfg, const identity& id,
                       const std::optional<backends::external_launch>& launch) {
  if (auto from_launcher = elastic::read_secret_descriptor(
        env(elastic::secret_fd_variable).value_or("")))
    return *from_launcher;
  if (launch && id.size > 1)
    // Every rank takes part, key or not (secret_agreement.hpp). Rank 0's
    // draw goes in the clear over MPI's own transport, which the ranks
    // trust already; jobs whose MPI crosses an untrusted network set
    // TROUPE_SECRET_KEY (mpirun -x) instead.
    return secret_from_offers(launch->allgather(secret_offer(cfg.secret_key, id.rank)),
                              cfg.secret_key);
  if (!cfg.secret_key.empty())
    return cfg.secret_key;
  if (id.has_store())
    return {};
  return elastic::random_secret();
}

control_plane::control_plane(const config& cfg, const std::string& secret)
  : connect_timeout_(std::chrono::milliseconds(
      static_cast<int64_t>(std::max(cfg.start_timeout_seconds, 0.001) * 1000))) {
  if (cfg.insecure_control_plane)
    return;
  if (!cfg.tls_certificate.empty())
    credentials_ = tls_credentials::from_files(cfg.tls_certificate, cfg.tls_key, cfg.tls_cafile);
  else
    credentials_ = tls_credentials::from_secret(secret);
}

void control_plane::configure(caf::actor_system_config& cfg) const {
  cfg.load<caf::io::middleman>();
  if (!credentials_)
    return;
  cfg.load<caf::openssl::manager>();
  cfg.openssl_certificate = credentials_->certificate();
  cfg.openssl_key = credentials_->key();
  cfg.openssl_cafile = credentials_->cafile();
}

caf::io::middleman_actor control_plane::start(caf::actor_system& sys) const {
  return credentials_ ? spawn_tls_middleman(sys, connect_timeout_)
                      : sys.middleman().actor_handle();
}

void control_plane::stop(caf::actor_system& sys, caf::io::middleman_actor& connections) const {
  if (credentials_)
    stop_tls_middleman(sys, connections);
  connections = nullptr;
}

caf::expected<uint16_t> control_plane::publish(const caf::io::middleman_actor& connections,
                                               const caf::actor& whom,
                                               const std::string& address) const {
  auto f = caf::make_function_view(connections, caf::duration{connect_timeout_});
  return f(caf::publish_atom::value, uint16_t{0},
           caf::actor_cast<caf::strong_actor_ptr>(whom), whom.home_system().message_types(whom),
           address, true);
}

caf::expected<caf::actor> control_plane::connect(const caf::io::middleman_actor& connections,
                                                 caf::actor_system& sys, const std::string& host,
                                                 uint16_t port, std::chrono::milliseconds timeout) {
  // At least 1 ms: a zero timespan would mean no timeout at all.
  auto f = caf::make_function_view(
    connections, caf::duration{std::max(timeout, std::chrono::milliseconds(1))});
  auto found = f(caf::connect_atom::value, host, port);
  if (!found)
    return std::move(found.error());
  auto& [node, actor, interface] = *found;
  if (!actor)
    return caf::make_error(caf::sec::no_actor_published_at_port, port);
  if (!sys.assignable(interface, sys.message_types<caf::actor>()))
    return caf::make_error(caf::sec::unexpected_actor_messaging_interface);
  return caf::actor_cast<caf::actor>(std::move(actor));
}

} // namespace troupe::workers
