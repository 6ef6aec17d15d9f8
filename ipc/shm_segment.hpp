#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace troupe::ipc {

/// A POSIX shared-memory segment mapped into this process. Whoever created
/// or opened it removes the name when destroyed before unlink() (a failed
/// rendezvous), so a group that never completes leaves nothing in
/// /dev/shm. The mapping itself lives until the object dies.
class shm_segment {
public:
  /// Creates `name` ("/troupe...") with `bytes` zeroed bytes; fails if it
  /// exists. Throws std::runtime_error naming the segment and the errno text.
  static shm_segment create(const std::string& name, size_t bytes);

  /// Maps the existing `name`, which must hold `bytes` bytes; throws
  /// std::runtime_error when it is absent or of another size.
  static shm_segment open(const std::string& name, size_t bytes);

  /// Maps the existing `name` whatever its size (its creator's header
  /// says what it holds); throws std::runtime_error when it is absent.
  static shm_segment open(const std::string& name);

  shm_segment(shm_segment&& other) noexcept;
  shm_segment& operator=(shm_segment&&) = delete;
  shm_segment(const shm_segment&) = delete;
  ~shm_segment();

  /// Removes the name (once every member has mapped it): the memory goes
  /// away with the last mapping, also when processes die. Idempotent; any
  /// member may call it, the first one removes the name.
  void unlink();

  /// The name stays when this mapping goes: only its creator (or a member
  /// calling unlink()) removes it.
  void keep_name() {
    owns_name_ = false;
  }

  void* data() const {
    return data_;
  }
  size_t size() const {
    return bytes_;
  }
  const std::string& name() const {
    return name_;
  }

private:
  shm_segment(std::string name, void* data, size_t bytes);

  std::string name_;
  void* data_;
  size_t bytes_;
  bool owns_name_;
};

/// A name no other segment has: "/troupe-" + `kind` + the creator's pid, its
/// pid namespace (pid_namespace_inode()) and 64 random bits. The namespace
/// says where the pid means a process: ranks of one host may share
/// /dev/shm from different pid namespaces (containers with the host's IPC).
std::string fresh_segment_name(const std::string& kind);

/// This process's pid namespace as segment names hold it: the inode of
/// /proc/self/ns/pid, 0 where procfs does not say.
uint64_t pid_namespace_inode();

/// Who made a name: the pid and pid namespace fresh_segment_name wrote.
struct segment_creator {
  pid_t pid = 0;
  uint64_t pid_namespace = 0;
  /// Whether `pid` names the creator to this process (same namespace).
  bool in_this_pid_namespace() const;
};

/// The creator in a name fresh_segment_name made, as /dev/shm lists it
/// ("troupe-<kind><pid>-<namespace>-<16 hex digits>", no slash; `kind`
/// letters and a '-', or empty); none for any other name.
std::optional<segment_creator> creator_of(const std::string& entry);

/// Removes the names of segments `pid` (of this process's pid namespace)
/// created that are still in /dev/shm, and returns them. A creator unlinks each name once its peers have
/// opened it; a name is left only when it died before that (SIGKILL, OOM).
/// For a process known to have exited: a live one may still be waiting
/// for its peers.
std::vector<std::string> remove_segments_of(pid_t pid);

/// The entries of /dev/shm that fresh_segment_name made (no slash), as
/// /dev/shm lists them now.
std::vector<std::string> segment_entries();

/// A name removed by remove_orphaned_segments, and who created it.
struct orphaned_segment {
  std::string name;  // with the slash
  pid_t creator = 0;
};

/// Removes the names fresh_segment_name made that are in /dev/shm now,
/// not in `before` (segment_entries() as a job started) and whose creator
/// has exited: what a job's ranks left when the launcher does not know
/// their pids (mpirun started them). A dead creator's name is never
/// opened again: its peers either opened it already or fail without it.
std::vector<orphaned_segment> remove_orphaned_segments(const std::vector<std::string>& before);

} // namespace troupe::ipc
