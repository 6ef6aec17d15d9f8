#pragma once

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

} // namespace troupe::test
