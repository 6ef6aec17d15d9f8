#pragma once

#include "elastic/launcher/line_forwarder.hpp"
#include "elastic/socket_util.hpp"

#include <csignal>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

namespace troupe::elastic::launcher {

/// The command could not be started (not found, not executable, ...).
class spawn_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One running rank: its process (leader of its own process group, so a
/// signal reaches whatever it forked too) and the read ends of its output.
struct worker_process {
  int rank = 0;
  pid_t pid = -1;
  bool running = true;
  net::unique_fd out; // closed at EOF
  net::unique_fd err;
  line_forwarder out_lines;
  line_forwarder err_lines;
  /// Started on this host (not through ssh or a spawn hook): `pid` is the
  /// rank's own process, whose leftovers in /dev/shm can be removed here.
  bool on_this_host = false;

  /// Sends `sig` to the worker's process group.
  void signal(int sig) const;

  /// Reads what its pipes hold now without blocking; at EOF, flushes the
  /// partial line and closes the pipe.
  void drain();
};

/// A started child: leader of its own process group, stdin from /dev/null
/// (or the given input), stdout and stderr on the (non-blocking) read ends
/// of pipes.
struct piped_child {
  pid_t pid = -1;
  net::unique_fd out;
  net::unique_fd err;
};

/// Starts `argv` (searched in PATH) with environment `env` and the
/// signals troupe-run changes back at their defaults. Throws spawn_error
/// with errno's text. The child gets SIGKILL when the calling thread ends
/// (PR_SET_PDEATHSIG): a discovery script started from the discovery
/// thread ends with it. A non-empty `input` (at most 4 KiB) is the child's
/// stdin, then EOF. A `cpu` >= 0 binds the child to that CPU before it
/// starts the command (--cpu-binding). The child gets `death_signal` when
/// the calling thread ends (PR_SET_PDEATHSIG).
piped_child spawn_piped(const std::vector<std::string>& argv,
                        const std::vector<std::string>& env, const std::string& input = {},
                        int cpu = -1, int death_signal = SIGKILL);

/// "rank 3", or "mpirun" for mpirun_rank: how troupe-run names a worker.
std::string worker_name(int rank);

/// Starts `argv` (searched in PATH) with environment `env`, stdin from
/// /dev/null or `input` (see spawn_piped), and stdout/stderr piped back through forwarders that emit to
/// `out` and `err`. Throws spawn_error. The worker gets SIGKILL (mpirun:
/// SIGTERM, which it passes on to its ranks) when the calling thread ends
/// (PR_SET_PDEATHSIG), so call it from the thread that lives as long as
/// troupe-run: its main thread.
worker_process spawn_worker(int rank, const std::vector<std::string>& argv,
                            const std::vector<std::string>& env,
                            line_forwarder::sink out, line_forwarder::sink err,
                            const std::string& input = {}, int cpu = -1);

} // namespace troupe::elastic::launcher
