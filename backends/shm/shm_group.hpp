#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/buffer_piece.hpp"
#include "backends/cpu/arith.hpp"
#include "backends/element_finish.hpp"
#include "ipc/shm_segment.hpp"

namespace troupe::backends {

using ipc::shm_segment;

struct shm_header;

/// How long a member waits for the others before it sleeps on a futex
/// (on the CPU's pause for 20 us, then yielding between looks). The
/// defaults suit members that share cores; polling() those that do not.
struct shm_spin_times {
  /// A member that spins this long catches a peer that arrives right
  /// behind it without a futex round trip, and costs little when it does
  /// not.
  std::chrono::microseconds round{20};
  /// Longer for a round of at most 1 KiB (a scalar: a loss, a counter),
  /// which is all latency: the other member is usually a wake-up behind
  /// (it learns of the agreement from its channel reader), and sleeping
  /// adds a second wake-up. A 4-byte allreduce in Gloo mode, 2 ranks on
  /// 2 cores: 127-152 -> 54-110 us in 6 of 7 alternating runs; 200 x 4
  /// KiB, whose rounds are larger, unchanged (docs/benchmarks.md).
  std::chrono::microseconds tiny_round{100};

  /// 2 ms in every wait, as MPI's blocking calls poll: the last member is
  /// usually a wake-up behind, and a member asleep adds a futex round trip
  /// to each of a round's waits. (Past its first 20 us a wait yields
  /// between looks, so the late member's threads can have the core.) Only
  /// where every member has a core of its own: a spinning member would
  /// hold the core a late one needs. 2 ranks on 2 cores (docs/benchmarks.md,
  /// run (17)), Gloo mode: 4 B mean 227 -> 96 us, 1 MiB 364 -> 278 us
  /// (medians); MPI: 4 B 133 -> 76 us (medians).
  static shm_spin_times polling();
};

/// The ranks of one process set on one host, reducing through a shared
/// segment: each member copies into its slot the parts of its input the
/// others reduce, reduces its own share (from its buffer and their slots),
/// and copies the others' shares of the result, a round of `slot_bytes` at
/// a time so the copies and the reduction stay in cache (a small round:
/// every member reduces all of it). A broadcast or an allgather goes
/// through the slots too, a round at a time: one copy in, one wait, one
/// copy out; an alltoall the same after a round that agrees on the number
/// of rounds. Members wait for each other on
/// counters in the segment (a short spin, then a futex); every wait ends at
/// the timeout, at abort(), when a member's process has exited or a member
/// closed its side, whichever comes first. Used from one thread per member
/// (the backend's), abort() from any.
class shm_group {
public:
  /// Bytes of the segment for `members` members (at most max_members).
  static size_t segment_bytes(int members, size_t slot_bytes);
  static constexpr int max_members = 256;

  /// Creates the segment `name` for a group (one member does, the others
  /// open it by name); throws backend_error.
  static shm_segment create_segment(const std::string& name, int members, size_t slot_bytes);

  /// The segment both communicators use: a fresh `data-` name
  /// (ipc::fresh_segment_name) and slots of 256 KiB, the size of a round,
  /// so that a round's slots and result (L + 1 of them on L ranks) stay in
  /// the caches of a few cores. The host's first member creates it, the
  /// others open it by name (std::runtime_error when it is absent or of
  /// another size).
  static shm_segment create_host_segment(int members);
  static shm_segment open_host_segment(const std::string& name, int members);

  using spin_times = shm_spin_times;

  /// Joins the group as `member` over `segment` and waits until every
  /// member has (then removes the segment's name). Throws backend_error
  /// when the segment is not such a group's or the others do not come in
  /// time.
  shm_group(shm_segment segment, int member, int members, std::chrono::milliseconds timeout,
            spin_times spin = {});
  /// Tells the other members that this one left: their next wait fails.
  ~shm_group();
  shm_group(const shm_group&) = delete;
  shm_group& operator=(const shm_group&) = delete;

  /// The allreduce of this member's part of a round with the same member of
  /// the group on every other host, in place; empty on a single host.
  using cross_step = std::function<void(void* data, size_t count)>;

  /// Reduces `count` elements of `element_bytes` at `data` in place with
  /// every member (`reduce` and `finish` must be the same on all); `finish`
  /// runs once on each part of the result, by the member that reduced it,
  /// before any other reads it. Throws backend_error; the group is unusable
  /// afterwards.
  void allreduce(void* data, size_t count, size_t element_bytes, element_reduction reduce,
                 const cross_step& cross, const element_finish& finish = {});
  /// The same for the concatenation of `pieces` (whole elements each),
  /// each written where it lies and read there or from its `input`: a fused
  /// allreduce's tensors without a fusion buffer to pack them into and
  /// unpack them from, and an allreduce into another tensor without a copy
  /// into it first.
  void allreduce(piece_span pieces, size_t element_bytes, element_reduction reduce,
                 const cross_step& cross, const element_finish& finish = {});
  /// Reduces the concatenation of the members' shares, `counts[m]`
  /// elements of `element_bytes` for member m (the same `counts` on every
  /// member), leaving only this member's share of the result in `output`
  /// (outside `input`), with `finish` applied. Each member reduces its own
  /// share: a round carries a slice of every share. Throws backend_error as
  /// allreduce().
  void reduce_scatter(const void* input, void* output, const std::vector<size_t>& counts,
                      size_t element_bytes, element_reduction reduce,
                      const element_finish& finish);
  /// Copies `bytes` at `data` of member `root` to `data` of every other
  /// member, a slot at a time (the same `bytes` and `root` on every
  /// member). Throws backend_error as allreduce().
  void broadcast(void* data, size_t bytes, int root);
  /// Gathers member m's `bytes[m]` bytes (this member's from `input`) into
  /// `output` of every member, in member order (the same `bytes` on every
  /// member; `input` outside `output` or at this member's place in it).
  /// Throws backend_error as allreduce().
  void allgather(const void* input, void* output, const std::vector<size_t>& bytes);
  /// Sends `send_bytes[k]` bytes of `input` (blocks in member order) to
  /// every member k and receives `recv_bytes[k]` bytes from each into
  /// `output` (blocks in member order): what member k sends this one is
  /// `recv_bytes[k]` here. Throws backend_error as allreduce().
  void alltoall(const void* input, const std::vector<size_t>& send_bytes, void* output,
                const std::vector<size_t>& recv_bytes);
  /// Returns once every member has called it. Throws backend_error as
  /// allreduce().
  void sync();

  /// Makes a wait of any member fail with "aborted" (a peer of the process
  /// set was lost). Any thread, any number of times.
  void abort();

  int members() const {
    return members_;
  }

private:
  // Arrives and waits for every member, spinning `spin` before sleeping.
  void barrier(std::chrono::microseconds spin);
  // The spin before sleeping in the barrier of a round of `bytes`.
  std::chrono::microseconds spin_for(size_t bytes) const;
  // Takes the next of the two slot sets, used by alternate rounds.
  int next_parity();
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
  spin_times spin_;
  uint64_t barriers_ = 0;  // barriers this member has entered
  int parity_ = 0;         // which of the two slot sets the next round uses
  const char* running_ = "allreduce";  // the collective a failure message names
};

} // namespace troupe::backends
