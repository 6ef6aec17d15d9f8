#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace troupe::workers {

/// Ends this process when troupe-run goes away, for ranks that are not its
/// direct children (those die by their parent-death signal): a connection
/// to troupe-run's store that authenticates (the store drops a connection
/// that does not) and then carries no request, so the only thing it can
/// ever read is the end of the connection, which means troupe-run is gone.
/// The process then gets SIGTERM and, if still alive 1 s later, SIGKILL,
/// as troupe-run's own stop would do.
class launcher_watch {
public:
  /// Connects with the job's `secret` (bounded by `timeout`) and starts
  /// watching on its own thread. Throws elastic::store_error naming the
  /// store when it cannot connect or authenticate.
  launcher_watch(const std::string& host, uint16_t port, const std::string& secret,
                 std::chrono::milliseconds timeout);
  /// Stops watching (shutdown(): troupe-run outliving us is no news).
  ~launcher_watch();

  launcher_watch(const launcher_watch&) = delete;
  launcher_watch& operator=(const launcher_watch&) = delete;

private:
  struct state;
  std::unique_ptr<state> state_;
};

} // namespace troupe::workers
