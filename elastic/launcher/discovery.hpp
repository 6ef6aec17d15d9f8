#pragma once

#include "elastic/launcher/host_plan.hpp"
#include "elastic/socket_util.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// --host-discovery-script: which hosts an elastic job may use right now.
namespace troupe::elastic::launcher {

/// Parses the script's output: one `host` or `host:slots` per line
/// (Horovod's format), `[v6 address]` or `[v6 address]:slots` for IPv6
/// literals; blank lines and repeated hosts are ignored (the first line of
/// a host counts). A line without slots gets `default_slots`
/// (--slots-per-host), else 1. A host name with a blank or a control byte
/// is malformed. Throws plan_error naming the bad line (control bytes as
/// \xNN).
std::vector<host_spec> parse_discovery_output(const std::string& text,
                                              std::optional<int> default_slots);

/// One run of the script: the hosts, or why there are none.
struct discovery_result {
  bool ok = false;
  std::vector<host_spec> hosts;
  std::string error;  // names the script and what went wrong
};

/// Runs `script` through /bin/sh with `env`; a script still running after
/// `timeout` is killed (with its process group) and reported as failed, as
/// is one that exits non-zero or prints a malformed line. `cancel` stops
/// the wait within 100 ms.
discovery_result run_discovery(const std::string& script, std::optional<int> default_slots,
                               const std::vector<std::string>& env,
                               std::chrono::milliseconds timeout,
                               const std::atomic<bool>& cancel);

/// Runs the script on its own thread, one run every `interval` after the
/// previous one ended (Horovod's polling), so a slow or hanging script
/// never holds up the launcher's loop; wake_fd() turns readable when a
/// result is waiting.
class discovery_poller {
public:
  struct options {
    std::string script;
    std::optional<int> default_slots;
    std::vector<std::string> env;
    std::chrono::milliseconds timeout{10000};
    std::chrono::milliseconds interval{1000};
  };

  explicit discovery_poller(options opts);
  /// Stops the thread, killing a script that is running.
  ~discovery_poller();

  discovery_poller(const discovery_poller&) = delete;
  discovery_poller& operator=(const discovery_poller&) = delete;

  int wake_fd() const {
    return wake_.get();
  }

  /// The newest result not taken yet (older untaken ones are dropped).
  std::optional<discovery_result> take();

private:
  void loop();

  options opts_;
  net::unique_fd wake_;
  std::atomic<bool> stop_{false};
  std::mutex mtx_;
  std::optional<discovery_result> latest_;
  std::thread thread_;
};

} // namespace troupe::elastic::launcher
