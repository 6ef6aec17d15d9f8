#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "backends/gloo/gloo_reduction.hpp"
#include "ipc/shm_segment.hpp"

namespace troupe::backends {

using ipc::shm_segment;

struct shm_header;

/// The ranks of one process set on one host, reducing through a shared
/// segment: each member copies its input into its slot, reduces its share
/// of the slots, and copies the result out, a round of `slot_bytes` at a
/// time so the copies and the reduction stay in cache. Members wait for
/// each other on counters in the segment (a short spin, then a futex);
/// every wait ends at the timeout, at abort(), when a member's process has
/// exited or a member closed its side, whichever comes first. Used from one
/// thread per member (the backend's), abort() from any.
class shm_group {
public:
  /// Bytes of the segment for `members` members (at most max_members).
  static size_t segment_bytes(int members, size_t slot_bytes);
  static constexpr int max_members = 256;

  /// Creates the segment `name` for a group (one member does, the others
  /// open it by name); throws backend_error.
  static shm_segment create_segment(const std::string& name, int members, size_t slot_bytes);

  /// Joins the group as `member` over `segment` and waits until every
  /// member has (then removes the segment's name). Throws backend_error
  /// when the segment is not such a group's or the others do not come in
  /// time.
  shm_group(shm_segment segment, int member, int members, std::chrono::milliseconds timeout);
  /// Tells the other members that this one left: their next wait fails.
  ~shm_group();
  shm_group(const shm_group&) = delete;
  shm_group& operator=(const shm_group&) = delete;

  /// The allreduce of this member's part of a round with the same member of
  /// the group on every other host, in place; empty on a single host.
  using cross_step = std::function<void(void* data, size_t count)>;

  /// Reduces `count` elements of `element_bytes` at `data` in place with
  /// every member (`reduce` must be the same on all). Throws backend_error;
  /// the group is unusable afterwards.
  void allreduce(void* data, size_t count, size_t element_bytes, element_reduction reduce,
                 const cross_step& cross);

  /// Makes a wait of any member fail with "aborted" (a peer of the process
  /// set was lost). Any thread, any number of times.
  void abort();

  int members() const {
    return members_;
  }

private:
  // Arrives and waits for every member, spinning `spin` before sleeping.
  void barrier(std::chrono::microseconds spin);
  // Marks the group failed for every member (the first cause wins) and
  // wakes them.
  void fail(uint32_t kind, int member);
  [[noreturn]] void throw_failure() const;
  bool all_arrived(uint64_t target) const;
  // Waits (deadline: timeout_) until every member reached `target`,
  // spinning `spin` before it sleeps.
  void wait_for(uint64_t target, std::chrono::microseconds spin);
  // Fails the group when a member's process exited (its pid is gone or a
  // zombie).
  void check_members_alive();
  char* slot(int parity, int member) const;
  char* result(int parity) const;

  shm_segment segment_;
  shm_header* header_;
  int member_;
  int members_;
  size_t slot_bytes_;
  std::chrono::milliseconds timeout_;
  uint64_t barriers_ = 0;  // barriers this member has entered
  int parity_ = 0;         // which of the two slot sets the next round uses
};

} // namespace troupe::backends
