// intruder MODE HOST PORT: one attack on a rank's control-plane port, as
// someone outside the job would try it. Exit 0 when the rank rejected it
// (the connection failed or was closed on us), 1 when the attack got
// through, 2 on a usage error.
//   caf-plain    CAF's plain middleman connects, then sends forged (bye)
//                and (shutdown) messages
//   caf-tls      CAF's OpenSSL module with certificates derived from
//                another secret, then the same forged messages
//   basp-header  a raw 32-byte BASP header announcing a 4 GiB payload,
//                then silence
//   garbage      64 KiB of random bytes
//   idle N       N TCP connections that never send a byte: each must be
//                closed by the rank within 10 s (its deadline for a TLS
//                handshake is 5 s; those over its cap of pending handshakes
//                are closed at once)

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "actors/atoms.hpp"
#include "elastic/socket_util.hpp"
#include "workers/tls_credentials.hpp"

namespace {

using namespace std::chrono_literals;
namespace net = troupe::elastic::net;
using troupe::actors::bye_atom;
using troupe::actors::shutdown_atom;

int caf_attack(const std::string& mode, const std::string& host, uint16_t port) {
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  std::optional<troupe::workers::tls_credentials> creds;
  if (mode == "caf-tls") {
    creds = troupe::workers::tls_credentials::from_secret("an-intruder-s-own-secret-0000");
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = creds->certificate();
    cfg.openssl_key = creds->key();
    cfg.openssl_cafile = creds->cafile();
  }
  caf::actor_system sys{cfg};
  auto remote = mode == "caf-tls" ? caf::openssl::remote_actor(sys, host, port)
                                  : sys.middleman().remote_actor(host, port);
  if (!remote) {
    std::printf("REJECTED: %s could not connect: %s\n", mode.c_str(),
                sys.render(remote.error()).c_str());
    return 0;
  }
  caf::anon_send(*remote, bye_atom::value, int32_t{0});
  caf::anon_send(*remote, shutdown_atom::value);
  std::this_thread::sleep_for(200ms);
  std::printf("GOT THROUGH: %s connected and sent forged messages\n", mode.c_str());
  caf::anon_send_exit(*remote, caf::exit_reason::user_shutdown);
  return 1;
}

// True when the peer closes the connection within `limit`.
bool closed_within(int fd, std::chrono::milliseconds limit) {
  const auto until = net::clock::now() + limit;
  char buf[4096];
  while (net::clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, net::poll_timeout(until)) <= 0)
      continue;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return true;
  }
  return false;
}

int raw_attack(const std::string& mode, const std::string& host, uint16_t port) {
  std::string why;
  auto fd = net::try_connect(host, port, net::clock::now() + 5s, why);
  if (!fd) {
    std::printf("FAIL: cannot reach %s:%u: %s\n", host.c_str(), port, why.c_str());
    return 1;
  }
  std::string bytes;
  if (mode == "basp-header") {
    // operation, two padding bytes, flags, payload length (all bits set:
    // 4 GiB in either byte order), operation data, source and destination.
    bytes.assign(32, '\0');
    bytes[0] = 1;
    for (int i = 4; i < 8; ++i)
      bytes[static_cast<size_t>(i)] = '\xff';
  } else {
    std::mt19937 gen{42};
    for (int i = 0; i < 64 * 1024; ++i)
      bytes.push_back(static_cast<char>(gen()));
  }
  net::send_all(fd.get(), bytes, net::clock::now() + 5s);
  if (closed_within(fd.get(), 10'000ms)) {
    std::printf("REJECTED: %s: the rank closed the connection\n", mode.c_str());
    return 0;
  }
  std::printf("GOT THROUGH: %s: the connection stayed open for 10 s\n", mode.c_str());
  return 1;
}

// N silent connections; each must be closed on us (EOF or an error) within
// `limit` of its connect. Prints how many closed when.
int idle_attack(const std::string& host, uint16_t port, int n) {
  using namespace std::chrono;
  constexpr auto limit = 10s;
  const auto start = net::clock::now();
  std::vector<net::unique_fd> fds;
  for (int i = 0; i < n; ++i) {
    std::string why;
    auto fd = net::try_connect(host, port, net::clock::now() + 5s, why);
    if (!fd) {
      std::printf("FAIL: connection %d of %d to %s:%u: %s\n", i + 1, n, host.c_str(), port,
                  why.c_str());
      return 1;
    }
    fds.push_back(std::move(fd));
  }
  const auto connected = net::clock::now();
  std::vector<double> closed_after(fds.size(), -1.0);  // seconds since `connected`
  size_t open = fds.size();
  char buf[4096];
  while (open > 0 && net::clock::now() < connected + limit) {
    std::vector<pollfd> polled;
    std::vector<size_t> index;
    for (size_t i = 0; i < fds.size(); ++i)
      if (closed_after[i] < 0) {
        polled.push_back(pollfd{fds[i].get(), POLLIN, 0});
        index.push_back(i);
      }
    if (::poll(polled.data(), polled.size(), net::poll_timeout(connected + limit)) <= 0)
      continue;
    for (size_t k = 0; k < polled.size(); ++k) {
      if (polled[k].revents == 0)
        continue;
      const auto got = ::recv(polled[k].fd, buf, sizeof buf, 0);
      if (got > 0)
        continue;  // bytes from the rank (a TLS alert): not closed yet
      if (got < 0 && (errno == EAGAIN || errno == EINTR))
        continue;
      closed_after[index[k]] = duration<double>(net::clock::now() - connected).count();
      --open;
    }
  }
  int at_once = 0;
  double last = 0;
  for (double t : closed_after) {
    if (t >= 0 && t < 1.0)
      ++at_once;
    last = std::max(last, t);
  }
  std::printf("idle: %d connections opened in %.3f s; %d closed within 1 s, %zu more by %.3f s, "
              "%zu still open after %lld s\n",
              n, duration<double>(connected - start).count(), at_once,
              fds.size() - open - static_cast<size_t>(at_once), last, open,
              static_cast<long long>(limit.count()));
  if (open > 0) {
    std::printf("GOT THROUGH: idle: %zu silent connections held open\n", open);
    return 1;
  }
  std::printf("REJECTED: idle: every silent connection was closed\n");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc != (mode == "idle" ? 5 : 4)) {
    std::fprintf(stderr,
                 "usage: intruder caf-plain|caf-tls|basp-header|garbage HOST PORT\n"
                 "       intruder idle HOST PORT N\n");
    return 2;
  }
  const std::string host = argv[2];
  const auto port = static_cast<uint16_t>(std::stoi(argv[3]));
  if (mode == "caf-plain" || mode == "caf-tls")
    return caf_attack(mode, host, port);
  if (mode == "basp-header" || mode == "garbage")
    return raw_attack(mode, host, port);
  if (mode == "idle")
    return idle_attack(host, port, std::stoi(argv[4]));
  std::fprintf(stderr, "intruder: unknown mode '%s'\n", mode.c_str());
  return 2;
}
