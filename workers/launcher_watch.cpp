#include "workers/launcher_watch.hpp"

#include "elastic/socket_util.hpp"
#include "elastic/store.hpp"

#include <array>
#include <cerrno>
#include <csignal>
#include <stdexcept>
#include <thread>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace troupe::workers {

namespace net = elastic::net;

struct launcher_watch::state {
  std::unique_ptr<elastic::store_client> conn;
  net::unique_fd stop{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::string where;
  std::thread thread;

  // Returns when the connection ends (troupe-run gone) or `stop` is
  // signalled; true for the former.
  bool wait_for_end() const {
    std::array<pollfd, 2> fds{pollfd{conn->native_handle(), POLLIN | POLLRDHUP, 0},
                              pollfd{stop.get(), POLLIN, 0}};
    for (;;) {
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR)
          continue;
        spdlog::error("troupe: cannot watch troupe-run's store at {}: {}", where,
                      net::error_text(errno));
        return false;
      }
      if (fds[1].revents != 0)
        return false;
      char buf[256];
      const auto n = ::read(conn->native_handle(), buf, sizeof buf);
      // The store never writes on this connection; bytes would be a
      // protocol error, and the end is all that matters.
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return true;
    }
  }

  void run() const {
    if (!wait_for_end())
      return;
    spdlog::error("troupe: troupe-run is gone (its store at {} closed the connection); "
                  "ending this rank",
                  where);
    ::kill(::getpid(), SIGTERM);
    // A handler may catch SIGTERM; the job is over either way.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    ::kill(::getpid(), SIGKILL);
  }
};

launcher_watch::launcher_watch(const std::string& host, uint16_t port,
                               const std::string& secret, std::chrono::milliseconds timeout)
  : state_(std::make_unique<state>()) {
  state_->where = host + ":" + std::to_string(port);
  if (!state_->stop)
    throw std::runtime_error("eventfd: " + net::error_text(errno));
  state_->conn = std::make_unique<elastic::store_client>(host, port, secret, timeout);
  state_->thread = std::thread{[s = state_.get()] { s->run(); }};
}

launcher_watch::~launcher_watch() {
  const uint64_t one = 1;
  (void)!::write(state_->stop.get(), &one, sizeof one);
  state_->thread.join();
}

} // namespace troupe::workers
