#include "workers/tls_middleman.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include <openssl/err.h>
#include <spdlog/spdlog.h>
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

// Differs: an accepted connection must finish its TLS handshake (with the
// job's certificate) and send its first BASP bytes within this, or it is
// closed. CAF's own connection timeout only covers a connection BASP has
// read from: a peer that connected and stayed silent held its socket and
// SSL object for good.
constexpr auto handshake_deadline = std::chrono::seconds(5);
// Differs: at most this many accepted connections of a listening socket wait
// for that at once; past it the oldest is closed for each new one, so that
// silent connections kept coming cannot shut a peer of the job out (one
// closed so retries, control_dialer).
constexpr size_t max_pending_handshakes = 64;

// One accepted connection from its accept until the peer's first
// application bytes arrive, when its TLS handshake is over. Owned by the
// connection's stream (ssl_policy): while it exists, so does the socket,
// which its deadline (a weak reference) may therefore shut down.
class handshake_watch {
public:
  explicit handshake_watch(native_socket fd) : fd_(fd) {
  }

  handshake_watch(const handshake_watch&) = delete;
  handshake_watch& operator=(const handshake_watch&) = delete;

  // On the multiplexer's thread, past the deadline: the stream then reads
  // the end of the socket, fails and tells the broker, which drops it.
  void expire() const {
    auto addr = caf::io::network::remote_addr_of_fd(fd_);
    spdlog::debug("troupe: control plane: closing a connection from {} that did not complete "
                  "its handshake within {} s",
                  addr ? *addr : std::string("?"), handshake_deadline.count());
    ::shutdown(fd_, SHUT_RDWR);
  }

private:
  native_socket fd_;
};

using handshake_ref = std::weak_ptr<const handshake_watch>;
using expire_atom = caf::atom_constant<caf::atom("hsexpire")>;

} // namespace

} // namespace troupe::workers

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::workers::handshake_ref)

namespace troupe::workers {

namespace {

// Runs one OpenSSL-backed call with an empty error queue before and after:
// SSL_get_error reads the queue, so only this call's errors may be in it.
template <class F>
auto clean(F&& f) {
  ERR_clear_error();
  auto result = f();
  ERR_clear_error();
  return result;
}

// Differs: every session call is wrapped in clean(); an accepted
// connection's watch ends with the first bytes read.
struct ssl_policy {
  explicit ssl_policy(caf::openssl::session_ptr session,
                      std::shared_ptr<const handshake_watch> watch = nullptr)
    : session_(std::move(session)), watch_(std::move(watch)) {
  }

  rw_state read_some(size_t& result, native_socket fd, void* buf, size_t len) {
    auto state = clean([&] { return session_->read_some(result, fd, buf, len); });
    if (watch_ && state == rw_state::success && result > 0)
      watch_.reset();  // application data: the handshake is done
    return state;
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
  std::shared_ptr<const handshake_watch> watch_;  // accepted, handshake not done
};

caf::openssl::session_ptr make_session(caf::actor_system& sys, native_socket fd, bool accepted) {
  return clean([&] { return caf::openssl::make_session(sys, fd, accepted); });
}

class scribe_impl : public caf::io::scribe {
public:
  scribe_impl(default_mpx& mpx, native_socket fd, caf::openssl::session_ptr session,
              std::shared_ptr<const handshake_watch> watch = nullptr)
    : scribe(caf::io::network::conn_hdl_from_socket(fd)),
      stream_(mpx, fd, std::move(session), std::move(watch)) {
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

// Receives each accepted connection's deadline from the actor clock and
// hands it to the multiplexer's thread, where the connection lives.
caf::behavior handshake_reaper(caf::event_based_actor* self) {
  return {[self](expire_atom, handshake_ref& ref) {
    self->home_system().middleman().backend().post([ref = std::move(ref)] {
      if (auto watch = ref.lock())
        watch->expire();
    });
  }};
}

class doorman_impl : public caf::io::network::doorman_impl {
public:
  doorman_impl(default_mpx& mpx, native_socket fd, caf::actor reaper)
    : caf::io::network::doorman_impl(mpx, fd), reaper_(std::move(reaper)) {
  }

  bool new_connection() override {
    if (detached())
      return false;  // the broker let go while the socket was still polled
    auto& mpx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    caf::detail::socket_guard guard{fd};
    // Differs: a bounded number of handshakes at once, each with a deadline.
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [](const handshake_ref& w) { return w.expired(); }),
                   pending_.end());
    caf::io::network::nonblocking(fd, true);
    auto session = make_session(parent()->system(), fd, true);
    if (!session)
      return false;
    if (pending_.size() >= max_pending_handshakes) {
      if (!warned_) {
        warned_ = true;
        spdlog::warn("troupe: control plane: {} connections to port {} have not completed "
                     "their TLS handshake; closing the oldest for each new one (logged once)",
                     max_pending_handshakes, port());
      }
      if (auto oldest = pending_.front().lock())
        oldest->expire();
      pending_.pop_front();
    }
    auto watch = std::make_shared<const handshake_watch>(fd);
    pending_.push_back(watch);
    caf::delayed_anon_send(reaper_, handshake_deadline, expire_atom::value, handshake_ref{watch});
    auto scribe = caf::make_counted<scribe_impl>(mpx, fd, std::move(session), std::move(watch));
    guard.release();  // the scribe owns the socket now
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }

private:
  caf::actor reaper_;
  // Connections still in their handshake, oldest first (the multiplexer's
  // thread only).
  std::deque<handshake_ref> pending_;
  bool warned_ = false;
};

class tls_middleman_actor : public caf::io::middleman_actor_impl {
public:
  tls_middleman_actor(caf::actor_config& cfg, caf::actor broker,
                      std::chrono::milliseconds connect_timeout, caf::actor reaper)
    : caf::io::middleman_actor_impl(cfg, std::move(broker)),
      connect_timeout_(connect_timeout),
      reaper_(std::move(reaper)) {
  }

  const char* name() const override {
    return "troupe.tls_middleman";
  }

  // Set at construction, never changed: readable from any thread.
  const caf::actor& reaper() const {
    return reaper_;
  }

  void on_exit() override {
    caf::anon_send_exit(reaper_, caf::exit_reason::user_shutdown);
    caf::io::middleman_actor_impl::on_exit();
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
    return caf::make_counted<doorman_impl>(mpx(), *fd, reaper_);
  }

private:
  default_mpx& mpx() {
    return static_cast<default_mpx&>(system().middleman().backend());
  }

  std::chrono::milliseconds connect_timeout_;
  const caf::actor reaper_;
};

} // namespace

caf::io::middleman_actor spawn_tls_middleman(caf::actor_system& sys,
                                             std::chrono::milliseconds connect_timeout) {
  return sys.spawn<tls_middleman_actor, caf::detached + caf::hidden>(
    sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP")), connect_timeout,
    sys.spawn<caf::hidden>(handshake_reaper));
}

void stop_tls_middleman(caf::actor_system& sys, caf::io::middleman_actor& actor) {
  if (!actor)
    return;
  // Every middleman_actor given here comes from spawn_tls_middleman.
  const caf::actor reaper =
    static_cast<tls_middleman_actor*>(caf::actor_cast<caf::abstract_actor*>(actor))->reaper();
  caf::scoped_actor self{sys, true};
  self->send_exit(actor, caf::exit_reason::kill);
  self->wait_for(actor);
  // Gone before the multiplexer it posts to.
  self->send_exit(reaper, caf::exit_reason::kill);
  self->wait_for(reaper);
  actor = nullptr;
}

} // namespace troupe::workers
