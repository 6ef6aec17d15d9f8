#include "metrics/endpoint.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

namespace troupe::metrics {

namespace {

// Opens and closes one connection to the server, which wakes its accept loop.
void poke(const std::string& address, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found) != 0)
    return;
  int fd = ::socket(found->ai_family, SOCK_STREAM, 0);
  if (fd >= 0) {
    ::connect(fd, found->ai_addr, found->ai_addrlen);
    ::close(fd);
  }
  freeaddrinfo(found);
}

} // namespace

endpoint::endpoint(const std::string& address, uint16_t port,
                   const std::shared_ptr<prometheus::Registry>& metrics)
  : address_(address) {
  const bool v6 = address.find(':') != std::string::npos;
  const auto listen = (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
  // civetweb gives each connection a thread for as long as it is open, so a
  // few idle or slow clients used to hold every thread and starve the
  // scrapes. Threads sleep when idle: 16 leave room for Prometheus, curl and
  // a dozen stuck clients, and each read or write of a request gets 1 s, so
  // even more stuck clients delay a scrape by about a second at most.
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
      "listening_ports", listen, "num_threads", std::to_string(server_threads),
      "request_timeout_ms", std::to_string(request_timeout.count()),
      "keep_alive_timeout_ms", std::to_string(request_timeout.count()),
      "enable_keep_alive", "yes"});
  } catch (const std::exception& e) {  // CivetException
    throw endpoint_error("cannot serve metrics on " + listen + ": " + e.what());
  }
  exposer_->RegisterCollectable(metrics);
  const auto ports = exposer_->GetListeningPorts();
  if (!ports.empty())
    port_ = static_cast<uint16_t>(ports.front());
}

endpoint::~endpoint() {
  // civetweb's accept loop notices the stop flag only after its 2 s poll
  // timeout; a connection wakes it, so shutdown() does not wait for it.
  std::atomic<bool> stopped{false};
  std::thread stopper{[&] {
    exposer_.reset();
    stopped = true;
  }};
  while (!stopped) {
    poke(address_, port_);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stopper.join();
}

} // namespace troupe::metrics
