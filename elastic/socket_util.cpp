#include "elastic/socket_util.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <iterator>
#include <system_error>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace troupe::elastic::net {

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other)
    reset(other.release());
  return *this;
}

unique_fd::~unique_fd() {
  reset();
}

int unique_fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void unique_fd::reset(int fd) {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = fd;
}

std::string error_text(int err) {
  return std::strerror(err);
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void set_nodelay(int fd) {
  // Store traffic is small request/reply pairs: Nagle would add ~40 ms each.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void set_keepalive(int fd, std::chrono::seconds idle, std::chrono::seconds interval, int count) {
  const int options[][2] = {{SOL_SOCKET, SO_KEEPALIVE},
                            {IPPROTO_TCP, TCP_KEEPIDLE},
                            {IPPROTO_TCP, TCP_KEEPINTVL},
                            {IPPROTO_TCP, TCP_KEEPCNT}};
  const int values[] = {1, static_cast<int>(idle.count()), static_cast<int>(interval.count()),
                        count};
  for (size_t i = 0; i < std::size(values); ++i)
    if (::setsockopt(fd, options[i][0], options[i][1], &values[i], sizeof values[i]) != 0)
      throw std::system_error(errno, std::generic_category(), "setsockopt (TCP keepalive)");
}

int poll_timeout(clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline
                                                           - clock::now());
  if (left.count() <= 0)
    return 0;
  if (left.count() > std::numeric_limits<int>::max())
    return std::numeric_limits<int>::max();
  return static_cast<int>(left.count());
}

namespace {

struct addrinfo_list {
  addrinfo* head = nullptr;
  ~addrinfo_list() {
    if (head)
      ::freeaddrinfo(head);
  }
};

int resolve(const std::string& host, uint16_t port, int flags,
            addrinfo_list& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  auto service = std::to_string(port);
  return ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                       &hints, &out.head);
}

// Waits until a non-blocking connect finished; returns 0 or an errno value.
int finish_connect(int fd, clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, POLLOUT, 0};
    int n = ::poll(&p, 1, poll_timeout(deadline));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno;
    if (n == 0)
      return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    return err;
  }
}

} // namespace

unique_fd try_connect(const std::string& host, uint16_t port,
                      clock::time_point deadline, std::string& why) {
  addrinfo_list addrs;
  if (int rc = resolve(host, port, 0, addrs); rc != 0) {
    why = ::gai_strerror(rc);
    return {};
  }
  for (auto* ai = addrs.head; ai != nullptr; ai = ai->ai_next) {
    unique_fd fd{::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                          ai->ai_protocol)};
    if (!fd) {
      why = error_text(errno);
      continue;
    }
    set_nonblocking(fd.get());
    int err = 0;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno == EINPROGRESS ? finish_connect(fd.get(), deadline) : errno;
    }
    if (err == 0) {
      set_nodelay(fd.get());
      return fd;
    }
    why = error_text(err);
  }
  return {};
}

unique_fd listen_on(const std::string& host, uint16_t port) {
  addrinfo_list addrs;
  if (int rc = resolve(host, port, AI_PASSIVE, addrs); rc != 0)
    throw std::runtime_error("cannot resolve " + host + ": "
                             + ::gai_strerror(rc));
  std::string why = "no address";
  for (auto* ai = addrs.head; ai != nullptr; ai = ai->ai_next) {
    unique_fd fd{::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                          ai->ai_protocol)};
    if (!fd) {
      why = error_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0
        && ::listen(fd.get(), SOMAXCONN) == 0) {
      set_nonblocking(fd.get());
      return fd;
    }
    why = error_text(errno);
  }
  throw std::runtime_error("cannot listen on " + host + ":"
                           + std::to_string(port) + ": " + why);
}

uint16_t local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return 0;
  if (addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

namespace {

// Waits for `events` on fd; false on timeout. EINTR is retried.
io_result await(int fd, short events, clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, poll_timeout(deadline));
    if (n > 0)
      return io_result::done;
    if (n == 0)
      return io_result::timed_out;
    if (errno != EINTR)
      return io_result::failed;
  }
}

} // namespace

io_result send_all(int fd, std::string_view data, clock::time_point deadline) {
  while (!data.empty()) {
    auto n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto r = await(fd, POLLOUT, deadline); r != io_result::done)
        return r;
      continue;
    }
    return errno == EPIPE || errno == ECONNRESET ? io_result::closed
                                                 : io_result::failed;
  }
  return io_result::done;
}

io_result recv_exact(int fd, size_t n, std::string& out,
                     clock::time_point deadline) {
  out.resize(n);
  size_t got = 0;
  while (got < n) {
    auto r = ::recv(fd, out.data() + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0)
      return io_result::closed;
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (auto w = await(fd, POLLIN, deadline); w != io_result::done)
        return w;
      continue;
    }
    return errno == ECONNRESET ? io_result::closed : io_result::failed;
  }
  return io_result::done;
}

} // namespace troupe::elastic::net
