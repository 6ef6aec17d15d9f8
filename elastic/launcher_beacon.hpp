#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace troupe::elastic {

class store_client;

/// "<job>/launcher": present while troupe-run runs a job whose store is
/// not its own (etcd), so that ranks can tell when it is gone
/// (workers/launcher_watch.hpp).
std::string launcher_key(const std::string& job);

/// How long the key outlives troupe-run's last renewal.
constexpr std::chrono::seconds launcher_lease{5};

/// troupe-run's side: holds `launcher_key(job)` under a lease of
/// launcher_lease, renewed every second on its own thread, and deletes
/// it when destroyed. A renewal that fails is retried at the next second;
/// the ranks see the key vanish once renewals have failed for the lease.
class launcher_beacon {
public:
  /// Sets the key (throws store_error) and starts renewing it.
  launcher_beacon(std::unique_ptr<store_client> store, const std::string& job);
  ~launcher_beacon();

  launcher_beacon(const launcher_beacon&) = delete;
  launcher_beacon& operator=(const launcher_beacon&) = delete;

private:
  struct state;
  std::unique_ptr<state> state_;
};

} // namespace troupe::elastic
