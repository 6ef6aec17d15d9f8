#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace troupe::actors {

/// Chrome trace ("traceEvents" array form) written so that the file is a
/// complete JSON document after every event: each append overwrites the
/// closing bracket and writes a new one, so a rank killed at any moment
/// leaves a file that still parses. Each tensor gets its own row (pid), as
/// in Horovod's timeline. Blocking file I/O: used by a detached actor.
class timeline_writer {
public:
  /// Creates (truncates) `path`. Throws std::runtime_error naming the path.
  explicit timeline_writer(const std::string& path);
  ~timeline_writer();

  timeline_writer(const timeline_writer&) = delete;
  timeline_writer& operator=(const timeline_writer&) = delete;

  /// Phase "B" (begin) or "E" (end) of `activity` on `tensor`'s row, at
  /// `ts_us` microseconds.
  void event(const std::string& tensor, char phase, const std::string& activity,
             int64_t ts_us);

  /// A global instant marker (CYCLE_START) at `ts_us`.
  void mark(const std::string& name, int64_t ts_us);

private:
  void append(const std::string& json_object);
  int row(const std::string& tensor);

  int fd_ = -1;
  int64_t end_ = 0;  // offset of the final "\n]"
  bool first_ = true;
  std::unordered_map<std::string, int> rows_;
};

} // namespace troupe::actors
