#pragma once

#include <chrono>

namespace troupe::test {

/// What a process holds that a reset or a removed set must give back.
struct resource_counts {
  int threads = 0;
  int fds = 0;
  int sockets = 0;

  bool operator==(const resource_counts& o) const {
    return threads == o.threads && fds == o.fds && sockets == o.sockets;
  }
  /// Nothing more than `before`.
  bool within(const resource_counts& before) const {
    return threads <= before.threads && fds <= before.fds && sockets <= before.sockets;
  }
};

resource_counts count_resources();

/// The counts once they stop changing (5 equal readings 100 ms apart, 5 s
/// at most): threads and sockets of stopped actors go away asynchronously.
resource_counts settled_resources();

/// The counts once they are back within `before`, or after `limit` if they
/// never come back: under load a peer may close its side of the last
/// connections seconds later, while a leak stays.
resource_counts back_within(const resource_counts& before, std::chrono::seconds limit);

} // namespace troupe::test
