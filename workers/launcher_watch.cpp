#include "workers/launcher_watch.hpp"

#include "elastic/embedded_store.hpp"
#include "elastic/launcher_beacon.hpp"
#include "elastic/socket_util.hpp"
#include "ipc/process_alive.hpp"

#include <array>
#include <cerrno>
#include <csignal>
#include <stdexcept>
#include <thread>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace troupe::workers {

namespace net = elastic::net;

namespace {

// How often the etcd beacon is read.
constexpr int beacon_poll_ms = 1000;

// The embedded store's connection carries nothing after its hello, so
// only TCP keepalive tells a troupe-run whose host died or became
// unreachable (no FIN, no RST) from a quiet one: about 30 s. A stopped
// troupe-run still answers (its kernel does): ranks outlive a Ctrl-Z.
constexpr std::chrono::seconds keepalive_idle{15};
constexpr std::chrono::seconds keepalive_interval{5};
constexpr int keepalive_probes = 3;

// The eventfd that ends the watch early; throws when there is none.
net::unique_fd stop_event() {
  net::unique_fd fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  if (!fd)
    throw std::runtime_error("eventfd: " + net::error_text(errno));
  return fd;
}

} // namespace

struct launcher_watch::state {
  std::unique_ptr<elastic::store_client> conn;
  // The embedded store's connection socket, or troupe-run's pidfd (`pid`
  // set), or -1: read `beacon` instead.
  int fd = -1;
  net::unique_fd pid_fd;
  pid_t pid = -1;
  std::string beacon;
  net::unique_fd stop = stop_event();
  std::string where;
  std::thread thread;

  // Returns when troupe-run is gone or `stop` is signalled; true for the
  // former.
  bool wait_for_end() const {
    return fd >= 0 ? descriptor_ends() : beacon_vanishes();
  }

  // The store's connection ends, or troupe-run's pidfd becomes readable.
  bool descriptor_ends() const {
    std::array<pollfd, 2> fds{pollfd{fd, POLLIN | POLLRDHUP, 0},
                              pollfd{stop.get(), POLLIN, 0}};
    for (;;) {
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR)
          continue;
        spdlog::error("troupe: cannot watch troupe-run ({}): {}",
                      pid > 0 ? "process " + std::to_string(pid) : "its store at " + where,
                      net::error_text(errno));
        return false;
      }
      if (fds[1].revents != 0)
        return false;
      if (pid > 0)
        return true;  // a pidfd is readable once its process exited
      char buf[256];
      const auto n = ::read(fd, buf, sizeof buf);
      // The store never writes on this connection; bytes would be a
      // protocol error, and the end is all that matters.
      // (ETIMEDOUT: keepalive found troupe-run's host gone.)
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return true;
    }
  }

  bool beacon_vanishes() const {
    pollfd p{stop.get(), POLLIN, 0};
    for (;;) {
      const int n = ::poll(&p, 1, beacon_poll_ms);
      if (n > 0)
        return false;
      if (n < 0 && errno != EINTR) {
        spdlog::error("troupe: cannot watch troupe-run's key in {}: {}", where,
                      net::error_text(errno));
        return false;
      }
      try {
        if (!conn->get(beacon))
          return true;
      } catch (const elastic::store_error& e) {
        // etcd out of reach: troupe-run's lease runs out too if it stays so.
        spdlog::warn("troupe: cannot read troupe-run's key: {}", e.what());
      }
    }
  }

  void run() const {
    if (!wait_for_end())
      return;
    spdlog::error("troupe: troupe-run is gone ({}); ending this rank",
                  pid > 0   ? "its process " + std::to_string(pid) + " exited"
                  : fd >= 0 ? "its store at " + where + " closed the connection or stopped "
                                                       "answering keepalive probes"
                            : "its key " + beacon + " in " + where + " expired");
    ::kill(::getpid(), SIGTERM);
    // A handler may catch SIGTERM; the job is over either way.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    ::kill(::getpid(), SIGKILL);
  }
};

launcher_watch::launcher_watch(const elastic::store_endpoint& store, const std::string& job,
                               const std::string& secret, std::chrono::milliseconds timeout)
  : state_(std::make_unique<state>()) {
  state_->where = store.describe();
  state_->conn = elastic::connect_store(store, secret, timeout);
  if (auto* own = dynamic_cast<elastic::embedded_store_client*>(state_->conn.get())) {
    state_->fd = own->native_handle();
    net::set_keepalive(state_->fd, keepalive_idle, keepalive_interval, keepalive_probes);
  }
  state_->beacon = elastic::launcher_key(job);
  state_->thread = std::thread{[s = state_.get()] { s->run(); }};
}

launcher_watch::launcher_watch(pid_t launcher, uint64_t start)
  : state_(std::make_unique<state>()) {
  state_->pid_fd = net::unique_fd{static_cast<int>(::syscall(SYS_pidfd_open, launcher, 0))};
  if (!state_->pid_fd)
    throw std::runtime_error("pidfd_open(" + std::to_string(launcher) +
                             "): " + net::error_text(errno));
  // Read after the pidfd took hold: the process it holds, alive, or a later
  // one with that pid (a later start time). Only troupe-run started then.
  const auto started = ipc::process_start_time(launcher);
  if (started != start)
    throw std::runtime_error(
      "process " + std::to_string(launcher) + " is not the troupe-run that started this rank " +
      (started ? "(it started at tick " + std::to_string(*started) + ", troupe-run at " +
                   std::to_string(start) + ")"
               : "(it is gone)"));
  state_->fd = state_->pid_fd.get();
  state_->pid = launcher;
  state_->thread = std::thread{[s = state_.get()] { s->run(); }};
}

launcher_watch::~launcher_watch() {
  const uint64_t one = 1;
  (void)!::write(state_->stop.get(), &one, sizeof one);
  state_->thread.join();
}

} // namespace troupe::workers
