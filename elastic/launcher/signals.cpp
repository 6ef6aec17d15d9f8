#include "elastic/launcher/signals.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <sys/signalfd.h>

namespace troupe::elastic::launcher {

namespace {

constexpr int handled[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};

} // namespace

int open_signal_fd() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : handled)
    if (sig != SIGPIPE)
      sigaddset(&set, sig);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0)
    throw std::runtime_error(std::string("sigprocmask: ")
                             + std::strerror(errno));
  // A reader gone from troupe-run's stdout must not kill it and orphan the
  // workers; the write error is handled instead.
  std::signal(SIGPIPE, SIG_IGN);
  int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
  return fd;
}

sigset_t changed_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : handled)
    sigaddset(&set, sig);
  return set;
}

std::string signal_name(int sig) {
  if (const char* abbrev = sigabbrev_np(sig))
    return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

} // namespace troupe::elastic::launcher
