#include "workers/control_plane.hpp"

#include <chrono>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/all.hpp>
#include <gtest/gtest.h>

using namespace std::chrono_literals;
using troupe::workers::control_plane;

namespace {

// A loopback listener that accepts nothing, its queue filled: the kernel
// drops further SYNs, so a connect to it sits in SYN retries (about 130 s)
// as one to a blackholed address would.
struct full_listener {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  uint16_t port = 0;
  std::vector<int> queued;

  full_listener() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 0) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      return;
    port = ntohs(addr.sin_port);
    for (int i = 0; i < 4; ++i) {
      const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      (void)::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      queued.push_back(c);
    }
  }
  // Closing it answers the pending SYN with a reset: the blocked connect
  // returns, and the actor system can stop.
  ~full_listener() {
    ::close(fd);
    for (int c : queued)
      ::close(c);
  }
};

} // namespace

// The caller's wait ends at its timeout on either plane; the TLS plane's
// own handshake ends at the start timeout too, so stopping it (what a
// failed init() does) does not wait out the kernel's SYN retries.
void connect_to_a_full_listener(bool tls) {
  troupe::workers::config cfg;
  cfg.insecure_control_plane = !tls;
  cfg.start_timeout_seconds = 1;
  const control_plane plane(cfg, "a secret of the test, long enough for the derivation");
  caf::actor_system_config sys_cfg;
  plane.configure(sys_cfg);
  caf::actor_system sys{sys_cfg};
  auto connections = plane.start(sys);
  full_listener listener;
  ASSERT_NE(listener.port, 0);
  const auto start = std::chrono::steady_clock::now();
  auto remote = control_plane::connect(connections, sys, "127.0.0.1", listener.port, 500ms);
  EXPECT_FALSE(remote);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the connect waited past its timeout";
  if (tls) {
    // With the listener still full: the middleman is not stuck in connect().
    plane.stop(sys, connections);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "stopping waited for the handshake";
  }
  // The stock middleman of the insecure plane may still be in connect():
  // the listener, declared after the actor system, goes first and ends it.
}

TEST(control_plane, a_connect_that_never_completes_ends_at_its_timeout) {
  connect_to_a_full_listener(false);
}

TEST(control_plane, a_tls_handshake_that_never_starts_ends_at_the_start_timeout) {
  connect_to_a_full_listener(true);
}
