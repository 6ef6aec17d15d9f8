#include "elastic/launcher/worker_process.hpp"

#include "elastic/launcher/signals.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

// `blocking_read`: the read end blocks (the exec status pipe) instead of
// being polled with the output pipes.
pipe_pair make_pipe(bool blocking_read = false) {
  int fds[2];
  // CLOEXEC on both ends: the child only keeps what dup2 installs on 1 and 2,
  // so no worker holds another worker's pipe open.
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw spawn_error("pipe: " + net::error_text(errno));
  pipe_pair p{net::unique_fd{fds[0]}, net::unique_fd{fds[1]}};
  if (!blocking_read)
    net::set_nonblocking(p.read.get());
  return p;
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings)
    out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// posix_spawnp's search, done before fork so the child only calls
// async-signal-safe functions: `name` itself when it has a '/', else the
// first executable file of that name in troupe-run's PATH.
std::string find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos)
    return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/bin:/usr/bin";
  for (size_t begin = 0; begin <= dirs.size();) {
    auto end = std::min(dirs.find(':', begin), dirs.size());
    auto dir = dirs.substr(begin, end - begin);
    auto candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)
        && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    begin = end + 1;
  }
  return {};
}

// Reports errno on `status` and ends the child (async-signal-safe).
[[noreturn]] void child_failed(int status) {
  int e = errno;
  (void)!::write(status, &e, sizeof e);
  ::_exit(127);
}

// The child between fork and exec: async-signal-safe calls only (the
// launcher has other threads). Reports a failure as its errno on `status`.
[[noreturn]] void become_worker(pid_t launcher, int in, int out, int err, int status,
                                const cpu_set_t* cpus, int death_signal, const char* file,
                                char* const* argv, char* const* envp) {
  auto fail = [status] { child_failed(status); };
  // Own process group: a terminal's Ctrl-C reaches troupe-run alone, which
  // forwards it, and a kill of the group also reaches the worker's children.
  if (::setpgid(0, 0) != 0)
    fail();
  // Dies with troupe-run, even by SIGKILL. The signal follows the death of
  // the forking *thread*: troupe-run forks from its main thread, which
  // lives as long as the process. A launcher that died before this call
  // left the child to a new parent already.
  if (::prctl(PR_SET_PDEATHSIG, death_signal) != 0 || ::getppid() != launcher)
    fail();
  // Before exec: every thread the command starts inherits it.
  if (cpus && ::sched_setaffinity(0, sizeof *cpus, cpus) != 0)
    fail();
  const auto defaults = changed_signals();
  for (int sig = 1; sig < NSIG; ++sig)
    if (sigismember(&defaults, sig) == 1)
      ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0)
    fail();
  if (in < 0)
    in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0 || ::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0
      || ::dup2(err, STDERR_FILENO) < 0)
    fail();
  ::execve(file, argv, envp);
  child_failed(status);
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

piped_child spawn_piped(const std::vector<std::string>& argv,
                        const std::vector<std::string>& env, const std::string& input, int cpu,
                        int death_signal) {
  const auto file = find_executable(argv[0]);
  if (file.empty())
    throw spawn_error(net::error_text(ENOENT));
  // The whole input waits in the pipe (it is far below the pipe's
  // capacity), followed by EOF.
  pipe_pair in_pipe;
  if (!input.empty()) {
    in_pipe = make_pipe(true);
    if (input.size() > 4096 ||
        ::write(in_pipe.write.get(), input.data(), input.size()) !=
          static_cast<ssize_t>(input.size()))
      throw spawn_error("cannot write the child's input: " + net::error_text(errno));
    in_pipe.write.reset();
  }
  auto out_pipe = make_pipe();
  auto err_pipe = make_pipe();
  // The child's exec closes the write end (CLOEXEC); a failure writes errno
  // first.
  auto status_pipe = make_pipe(true);
  auto args = c_strings(argv);
  auto envp = c_strings(env);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (cpu >= 0)
    CPU_SET(cpu, &cpus);
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw spawn_error(net::error_text(errno));
  if (pid == 0)
    become_worker(launcher, in_pipe.read ? in_pipe.read.get() : -1, out_pipe.write.get(),
                  err_pipe.write.get(), status_pipe.write.get(), cpu >= 0 ? &cpus : nullptr,
                  death_signal, file.c_str(), args.data(), envp.data());
  status_pipe.write.reset();
  int error = 0;
  ssize_t n = 0;
  do {
    n = ::read(status_pipe.read.get(), &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof error) {
    int ignored = 0;
    ::waitpid(pid, &ignored, 0);
    throw spawn_error(net::error_text(error));
  }
  return {pid, std::move(out_pipe.read), std::move(err_pipe.read)};
}

worker_process spawn_worker(int rank, const std::vector<std::string>& argv,
                            const std::vector<std::string>& env,
                            line_forwarder::sink out,
                            line_forwarder::sink err, const std::string& input, int cpu) {
  piped_child child;
  try {
    // mpirun dies with troupe-run too, but by SIGTERM: killed, it would
    // leave the ranks it started running.
    child = spawn_piped(argv, env, input, cpu, rank == mpirun_rank ? SIGTERM : SIGKILL);
  } catch (const spawn_error& e) {
    throw spawn_error("cannot start '" + argv[0] + "'"
                      + (rank == mpirun_rank ? "" : " for " + worker_name(rank)) + ": "
                      + e.what());
  }
  return worker_process{rank,
                        child.pid,
                        true,
                        std::move(child.out),
                        std::move(child.err),
                        line_forwarder{rank, "stdout", std::move(out)},
                        line_forwarder{rank, "stderr", std::move(err)}};
}

} // namespace troupe::elastic::launcher
