#include "metrics/http_server.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <civetweb.h>

#include "metrics/text_format.hpp"

namespace troupe::metrics {

namespace {

// Whatever civetweb would print (bad requests, closed sockets) is dropped:
// the worker's stderr belongs to the training script.
int quiet(const mg_connection*, const char*) {
  return 1;
}

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

bool method_is(const mg_request_info* info, const char* m) {
  return info->request_method && std::strcmp(info->request_method, m) == 0;
}

} // namespace

struct http_server::impl {
  renderer render;
  std::string address;
  mg_context* ctx = nullptr;

  static int on_metrics(mg_connection* conn, void* self) {
    const auto* info = mg_get_request_info(conn);
    const bool head = method_is(info, "HEAD");
    if (!head && !method_is(info, "GET")) {
      mg_send_http_error(conn, 405, "only GET and HEAD are served here\n");
      return 405;
    }
    const auto body = static_cast<impl*>(self)->render();
    mg_send_http_ok(conn, text::content_type, static_cast<long long>(body.size()));
    if (!head)
      mg_write(conn, body.data(), body.size());
    return 200;
  }

  static int on_other(mg_connection* conn, void*) {
    mg_send_http_error(conn, 404, "not found: metrics are served at /metrics\n");
    return 404;
  }
};

http_server::http_server(const std::string& address, uint16_t port, renderer render)
  : impl_(std::make_unique<impl>()) {
  impl_->render = std::move(render);
  impl_->address = address;
  const bool v6 = address.find(':') != std::string::npos;
  const auto listen = (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
  // Two threads: Prometheus and a person with curl. Slow or silent clients
  // are cut off instead of holding a thread.
  const char* options[] = {"listening_ports",    listen.c_str(),
                           "num_threads",        "2",
                           "request_timeout_ms", "5000",
                           "enable_keep_alive",  "yes",
                           nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = quiet;
  mg_init_library(0);
  char text[256] = {};
  unsigned code = 0;
  mg_error_data error{&code, text, sizeof text};
  mg_init_data init{&callbacks, nullptr, options};
  impl_->ctx = mg_start2(&init, &error);
  if (!impl_->ctx) {
    mg_exit_library();
    throw http_error("cannot serve metrics on " + listen + ": " + text);
  }
  // Exact match first; "/" then catches every other path.
  mg_set_request_handler(impl_->ctx, "/metrics$", &impl::on_metrics, impl_.get());
  mg_set_request_handler(impl_->ctx, "/", &impl::on_other, nullptr);
  mg_server_port bound{};
  if (mg_get_server_ports(impl_->ctx, 1, &bound) == 1)
    port_ = static_cast<uint16_t>(bound.port);
}

http_server::~http_server() {
  // civetweb's accept loop notices the stop flag only after its 2 s poll
  // timeout; a connection wakes it, so shutdown() does not wait for it.
  std::atomic<bool> stopped{false};
  std::thread stopper{[&] {
    mg_stop(impl_->ctx);
    stopped = true;
  }};
  while (!stopped) {
    poke(impl_->address, port_);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stopper.join();
  mg_exit_library();
}

} // namespace troupe::metrics
