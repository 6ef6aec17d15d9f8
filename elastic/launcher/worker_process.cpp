#include "elastic/launcher/worker_process.hpp"

#include "elastic/launcher/signals.hpp"

#include <cerrno>
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

namespace troupe::elastic::launcher {

namespace {

// Drains one pipe into `lines`; closes it at EOF or on a read error.
void drain_pipe(net::unique_fd& fd, line_forwarder& lines) {
  char buf[65536];
  while (fd) {
    auto n = ::read(fd.get(), buf, sizeof(buf));
    if (n > 0) {
      lines.feed({buf, static_cast<size_t>(n)});
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    lines.finish();
    fd.reset();
  }
}

struct pipe_pair {
  net::unique_fd read;
  net::unique_fd write;
};

pipe_pair make_pipe() {
  int fds[2];
  // CLOEXEC on both ends: the child only keeps what dup2 installs on 1 and 2,
  // so no worker holds another worker's pipe open.
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw spawn_error("pipe: " + net::error_text(errno));
  pipe_pair p{net::unique_fd{fds[0]}, net::unique_fd{fds[1]}};
  net::set_nonblocking(p.read.get());
  return p;
}

// RAII for the posix_spawn attribute and file-action objects.
struct spawn_setup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;

  spawn_setup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~spawn_setup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  spawn_setup(const spawn_setup&) = delete;
  spawn_setup& operator=(const spawn_setup&) = delete;
};

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings)
    out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

} // namespace

std::string worker_name(int rank) {
  return rank == mpirun_rank ? "mpirun" : "rank " + std::to_string(rank);
}

void worker_process::signal(int sig) const {
  ::kill(-pid, sig);
}

void worker_process::drain() {
  drain_pipe(out, out_lines);
  drain_pipe(err, err_lines);
}

worker_process spawn_worker(int rank, const std::vector<std::string>& argv,
                            const std::vector<std::string>& env,
                            line_forwarder::sink out,
                            line_forwarder::sink err) {
  auto out_pipe = make_pipe();
  auto err_pipe = make_pipe();
  spawn_setup setup;
  // Own process group: a terminal's Ctrl-C reaches troupe-run alone, which
  // forwards it, and a kill of the group also reaches the worker's children.
  short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK
                | POSIX_SPAWN_SETSIGDEF;
  posix_spawnattr_setflags(&setup.attr, flags);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&setup.attr, &none);
  auto defaults = changed_signals();
  posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out_pipe.write.get(),
                                   STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, err_pipe.write.get(),
                                   STDERR_FILENO);
  auto args = c_strings(argv);
  auto envp = c_strings(env);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &setup.actions, &setup.attr,
                        args.data(), envp.data());
  if (rc != 0)
    throw spawn_error("cannot start '" + argv[0] + "'"
                      + (rank == mpirun_rank ? "" : " for " + worker_name(rank)) + ": "
                      + net::error_text(rc));
  return worker_process{rank,
                        pid,
                        true,
                        std::move(out_pipe.read),
                        std::move(err_pipe.read),
                        line_forwarder{rank, "stdout", std::move(out)},
                        line_forwarder{rank, "stderr", std::move(err)}};
}

} // namespace troupe::elastic::launcher
