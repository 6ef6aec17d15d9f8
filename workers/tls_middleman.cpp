#include "workers/tls_middleman.hpp"

#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include <openssl/err.h>
#include <sys/socket.h>

#include <caf/all.hpp>
#include <caf/detail/socket_guard.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/interfaces.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/openssl/session.hpp>

#include "elastic/socket_util.hpp"

// The transport classes follow libcaf_openssl's middleman_actor.cpp (0.17.6);
// what differs is marked.

namespace troupe::workers {

namespace {

using caf::io::network::native_socket;
using caf::io::network::rw_state;
using default_mpx = caf::io::network::default_multiplexer;

// Runs one OpenSSL-backed call with an empty error queue before and after:
// SSL_get_error reads the queue, so only this call's errors may be in it.
template <class F>
auto clean(F&& f) {
  ERR_clear_error();
  auto result = f();
  ERR_clear_error();
  return result;
}

// Differs: every session call is wrapped in clean().
struct ssl_policy {
  explicit ssl_policy(caf::openssl::session_ptr session) : session_(std::move(session)) {
  }

  rw_state read_some(size_t& result, native_socket fd, void* buf, size_t len) {
    return clean([&] { return session_->read_some(result, fd, buf, len); });
  }

  rw_state write_some(size_t& result, native_socket fd, const void* buf, size_t len) {
    return clean([&] { return session_->write_some(result, fd, buf, len); });
  }

  bool try_accept(native_socket& result, native_socket fd) {
    sockaddr_storage addr;
    std::memset(&addr, 0, sizeof(addr));
    caf::io::network::socket_size_type addrlen = sizeof(addr);
    result = ::accept(fd, reinterpret_cast<sockaddr*>(&addr), &addrlen);
    if (result == caf::io::network::invalid_native_socket)
      return false;
    caf::io::network::child_process_inherit(result, false);
    return clean([&] { return session_->try_accept(result); });
  }

  bool must_read_more(native_socket fd, size_t threshold) {
    return session_->must_read_more(fd, threshold);
  }

private:
  caf::openssl::session_ptr session_;
};

caf::openssl::session_ptr make_session(caf::actor_system& sys, native_socket fd, bool accepted) {
  return clean([&] { return caf::openssl::make_session(sys, fd, accepted); });
}

class scribe_impl : public caf::io::scribe {
public:
  scribe_impl(default_mpx& mpx, native_socket fd, caf::openssl::session_ptr session)
    : scribe(caf::io::network::conn_hdl_from_socket(fd)), stream_(mpx, fd, std::move(session)) {
  }

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_)
      launch();
  }

  void ack_writes(bool enable) override {
    stream_.ack_writes(enable);
  }

  std::vector<char>& wr_buf() override {
    return stream_.wr_buf();
  }

  std::vector<char>& rd_buf() override {
    return stream_.rd_buf();
  }

  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }

  void flush() override {
    stream_.flush(this);
  }

  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string();
  }

  uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }

  void add_to_loop() override {
    stream_.activate(this);
  }

  void remove_from_loop() override {
    stream_.passivate();
  }

private:
  void launch() {
    launched_ = true;
    stream_.start(this);
    // Schedules the scribe while the handshake still needs SSL_connect or
    // SSL_accept calls.
    stream_.force_empty_write(this);
  }

  bool launched_ = false;
  caf::io::network::stream_impl<ssl_policy> stream_;
};

class doorman_impl : public caf::io::network::doorman_impl {
public:
  doorman_impl(default_mpx& mpx, native_socket fd) : caf::io::network::doorman_impl(mpx, fd) {
  }

  bool new_connection() override {
    if (detached())
      return false;  // the broker let go while the socket was still polled
    auto& mpx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    caf::detail::socket_guard guard{fd};
    caf::io::network::nonblocking(fd, true);
    auto session = make_session(parent()->system(), fd, true);
    if (!session)
      return false;
    auto scribe = caf::make_counted<scribe_impl>(mpx, fd, std::move(session));
    guard.release();  // the scribe owns the socket now
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }
};

class tls_middleman_actor : public caf::io::middleman_actor_impl {
public:
  tls_middleman_actor(caf::actor_config& cfg, caf::actor broker,
                      std::chrono::milliseconds connect_timeout)
    : caf::io::middleman_actor_impl(cfg, std::move(broker)),
      connect_timeout_(connect_timeout) {
  }

  const char* name() const override {
    return "troupe.tls_middleman";
  }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    // Differs: a non-blocking connect bounded by the timeout (CAF's
    // new_tcp_connection blocks for the kernel's SYN retries).
    std::string why;
    auto connected = elastic::net::try_connect(
      host, port, std::chrono::steady_clock::now() + connect_timeout_, why);
    if (!connected)
      return caf::make_error(caf::sec::cannot_connect_to_node,
                             host + ":" + std::to_string(port) + ": " + why);
    const native_socket fd = connected.release();
    auto session = make_session(system(), fd, false);
    if (!session) {
      caf::io::network::close_socket(fd);  // differs: the socket is not leaked
      return caf::sec::cannot_connect_to_node;
    }
    return caf::make_counted<scribe_impl>(mpx(), fd, std::move(session));
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr,
                                           bool reuse) override {
    auto fd = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd)
      return std::move(fd.error());
    return caf::make_counted<doorman_impl>(mpx(), *fd);
  }

private:
  default_mpx& mpx() {
    return static_cast<default_mpx&>(system().middleman().backend());
  }

  std::chrono::milliseconds connect_timeout_;
};

} // namespace

caf::io::middleman_actor spawn_tls_middleman(caf::actor_system& sys,
                                             std::chrono::milliseconds connect_timeout) {
  return sys.spawn<tls_middleman_actor, caf::detached + caf::hidden>(
    sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP")), connect_timeout);
}

void stop_tls_middleman(caf::actor_system& sys, caf::io::middleman_actor& actor) {
  if (!actor)
    return;
  caf::scoped_actor self{sys, true};
  self->send_exit(actor, caf::exit_reason::kill);
  self->wait_for(actor);
  actor = nullptr;
}

} // namespace troupe::workers
