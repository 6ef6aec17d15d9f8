#include "metrics/endpoint.hpp"

#include <chrono>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

namespace troupe::metrics {
namespace {

// Sends raw bytes and returns everything the server answered until it
// closed the connection (requests say "Connection: close").
// A connected socket, or -1; reads on it give up after `timeout_s`.
int connect_to(uint16_t port, time_t timeout_s) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string roundtrip(uint16_t port, const std::string& request, time_t timeout_s = 5) {
  int fd = connect_to(port, timeout_s);
  std::string reply;
  if (fd >= 0 &&
      ::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    ::shutdown(fd, SHUT_WR);
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
      reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

std::string get(uint16_t port, const std::string& method, const std::string& path,
                time_t timeout_s = 5) {
  return roundtrip(port, method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                   timeout_s);
}

// A registry with one counter, as the rank and launcher sets give theirs.
std::shared_ptr<prometheus::Registry> one_counter(const std::string& name) {
  auto reg = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name(name).Help("h").Register(*reg).Add({}).Increment();
  return reg;
}

TEST(endpoint, serves_the_registry_on_the_port_it_bound) {
  const auto reg = one_counter("x_total");  // the endpoint does not keep it alive
  endpoint server{"127.0.0.1", 0, reg};
  ASSERT_NE(server.port(), 0);  // port 0: whichever was free
  const auto reply = get(server.port(), "GET", "/metrics");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Type: text/plain"), std::string::npos) << reply;
  EXPECT_NE(reply.find("\nx_total 1\n"), std::string::npos) << reply;
}

TEST(endpoint, other_paths_and_garbage) {
  endpoint server{"127.0.0.1", 0, one_counter("x_total")};
  EXPECT_EQ(get(server.port(), "GET", "/").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(get(server.port(), "GET", "/other").rfind("HTTP/1.1 404", 0), 0u);
  // Malformed requests are answered with an error or closed; the server
  // keeps serving.
  const auto garbage = roundtrip(server.port(), std::string("\x16\x03\x01 not http\r\n\r\n"));
  EXPECT_TRUE(garbage.empty() || garbage.find(" 400 ") != std::string::npos) << garbage;
  roundtrip(server.port(), std::string(20000, 'A'));
  EXPECT_EQ(get(server.port(), "GET", "/metrics").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(endpoint, port_in_use_is_an_error_and_stopping_releases_it_at_once) {
  uint16_t port = 0;
  const auto start = std::chrono::steady_clock::now();
  {
    endpoint first{"127.0.0.1", 0, one_counter("x_total")};
    port = first.port();
    EXPECT_THROW(endpoint("127.0.0.1", port, one_counter("y_total")), endpoint_error);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  const auto reg = one_counter("again_total");
  endpoint again{"127.0.0.1", port, reg};
  EXPECT_NE(get(port, "GET", "/metrics").find("again_total 1\n"), std::string::npos);
}

// Ten clients that connect and send nothing, and ten that send half a
// request, each hold a civetweb thread; scrapes must still be answered
// within 1 s (with 2 threads and 5 s timeouts they waited 5 s and more).
TEST(endpoint, idle_and_slow_clients_do_not_starve_scrapes) {
  endpoint server{"127.0.0.1", 0, one_counter("x_total")};
  for (const std::string opening : {"", "GET /metrics HTTP/1.1\r\nHost: x\r\n"}) {
    std::vector<int> stuck;
    for (int i = 0; i < 10; ++i) {
      const int fd = connect_to(server.port(), 5);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::write(fd, opening.data(), opening.size()),
                static_cast<ssize_t>(opening.size()));
      stuck.push_back(fd);
    }
    for (int scrape = 0; scrape < 3; ++scrape)
      EXPECT_EQ(get(server.port(), "GET", "/metrics", 1).rfind("HTTP/1.1 200", 0), 0u)
        << "scrape " << scrape << " with 10 clients sending '" << opening << "'";
    for (int fd : stuck)
      ::close(fd);
  }
}

} // namespace
} // namespace troupe::metrics
