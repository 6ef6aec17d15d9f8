#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

// Small POSIX socket helpers shared by the store client and server.
namespace troupe::elastic::net {

using clock = std::chrono::steady_clock;

/// Owns a file descriptor; closes it on destruction.
class unique_fd {
public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {
    // nop
  }
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {
    // nop
  }
  unique_fd& operator=(unique_fd&& other) noexcept;
  ~unique_fd();

  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;

  int get() const {
    return fd_;
  }
  explicit operator bool() const {
    return fd_ >= 0;
  }
  int release();
  void reset(int fd = -1);

private:
  int fd_ = -1;
};

/// Human-readable text of errno value `err`.
std::string error_text(int err);

void set_nonblocking(int fd);
void set_nodelay(int fd);
/// TCP keepalive: a peer whose host died or became unreachable without
/// closing the connection is reported as a connection error after about
/// idle + count x interval. Throws std::system_error when refused.
void set_keepalive(int fd, std::chrono::seconds idle, std::chrono::seconds interval, int count);

/// Milliseconds left until `deadline` (0 when passed), clamped for poll().
int poll_timeout(clock::time_point deadline);

/// One non-blocking connect attempt bounded by `deadline`. Returns the
/// connected (non-blocking, TCP_NODELAY) socket, or an invalid fd with the
/// reason in `why`.
unique_fd try_connect(const std::string& host, uint16_t port,
                      clock::time_point deadline, std::string& why);

/// Listening socket on host:port (port 0 = any); throws std::runtime_error.
unique_fd listen_on(const std::string& host, uint16_t port);

/// Port a bound socket listens on.
uint16_t local_port(int fd);

/// Outcome of a deadline-bounded transfer.
enum class io_result { done, timed_out, closed, failed };

/// Writes all of `data` to a non-blocking socket before `deadline`.
io_result send_all(int fd, std::string_view data, clock::time_point deadline);

/// Reads exactly `n` bytes into `out` before `deadline`.
io_result recv_exact(int fd, size_t n, std::string& out,
                     clock::time_point deadline);

} // namespace troupe::elastic::net
