#include "metrics/http_server.hpp"

#include <atomic>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace troupe::metrics {
namespace {

// Sends raw bytes and returns everything the server answered until it
// closed the connection (requests say "Connection: close").
std::string roundtrip(uint16_t port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    ::shutdown(fd, SHUT_WR);
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
      reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

std::string get(uint16_t port, const std::string& method, const std::string& path) {
  return roundtrip(port, method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

TEST(http_server, serves_metrics_with_the_prometheus_content_type) {
  std::atomic<int> scrapes{0};
  http_server server{"127.0.0.1", 0, [&] {
                       ++scrapes;
                       return std::string("x_total 1\n");
                     }};
  ASSERT_NE(server.port(), 0);
  const auto reply = get(server.port(), "GET", "/metrics");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            std::string::npos)
    << reply;
  EXPECT_EQ(reply.substr(reply.size() - 10), "x_total 1\n");
  EXPECT_EQ(scrapes, 1);
}

TEST(http_server, other_paths_methods_and_garbage) {
  http_server server{"127.0.0.1", 0, [] { return std::string("x 1\n"); }};
  EXPECT_EQ(get(server.port(), "GET", "/").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(get(server.port(), "GET", "/metrics/x").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(get(server.port(), "POST", "/metrics").rfind("HTTP/1.1 405", 0), 0u);
  const auto head = get(server.port(), "HEAD", "/metrics");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(head.find("x 1\n"), std::string::npos);
  // Malformed requests are answered with an error or closed; the server
  // keeps serving.
  const auto garbage = roundtrip(server.port(), std::string("\x16\x03\x01 not http\r\n\r\n"));
  EXPECT_TRUE(garbage.empty() || garbage.find(" 400 ") != std::string::npos) << garbage;
  roundtrip(server.port(), std::string(20000, 'A'));
  EXPECT_EQ(get(server.port(), "GET", "/metrics").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(http_server, port_is_released_when_stopped) {
  uint16_t port = 0;
  {
    http_server first{"127.0.0.1", 0, [] { return std::string(); }};
    port = first.port();
    EXPECT_THROW(http_server("127.0.0.1", port, [] { return std::string(); }), http_error);
  }
  http_server again{"127.0.0.1", port, [] { return std::string("again 1\n"); }};
  EXPECT_NE(get(port, "GET", "/metrics").find("again 1\n"), std::string::npos);
}

} // namespace
} // namespace troupe::metrics
