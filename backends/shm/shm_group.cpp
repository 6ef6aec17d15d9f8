#include "backends/shm/shm_group.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/thread_affinity.hpp"
#include "ipc/futex.hpp"
#include "ipc/process_alive.hpp"

namespace troupe::backends {

namespace {

using ipc::futex_wait;
using ipc::futex_wake_all;
using clock = std::chrono::steady_clock;

// Changes with the header's layout: a member of another build does not
// take a segment it would read otherwise.
constexpr uint64_t segment_magic = 0x54524f5550453032;  // "TROUPE02"

// Why a group failed; the first cause is kept.
enum failure_kind : uint32_t {
  healthy = 0,
  aborted,    // abort(): a peer of the process set was lost
  closed,     // a member destroyed its side (reset, shutdown, set removed)
  exited,     // a member's process is gone
  timed_out,  // a member did not arrive within the timeout
  cross_failed,  // a member's allreduce with the other hosts failed
};

// A round of at most this many bytes is all latency (spin_times).
constexpr size_t tiny_round_bytes = 1024;
// The slots of the host segment both communicators use (see
// create_host_segment).
constexpr size_t host_slot_bytes = size_t{256} << 10;
// How often a sleeping member checks that the others' processes still
// exist.
constexpr auto liveness_period = std::chrono::milliseconds(50);

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// This process's pid namespace as a word of the header; 0 where procfs
// does not say (members without one check each other's pids, as kill()
// alone can).
uint64_t pid_namespace_id() {
  static const uint64_t id = [] {
    const auto ns = ipc::pid_namespace();
    return ns.empty() ? uint64_t{0} : std::hash<std::string>{}(ns) | 1;
  }();
  return id;
}

} // namespace

// The segment's first page; the slots follow it.
struct shm_header {
  uint64_t magic;
  uint64_t members;
  uint64_t slot_bytes;
  alignas(64) std::atomic<uint32_t> wake_seq;  // the futex word: bumped by every arrival
  std::atomic<uint32_t> sleepers;               // members in futex_wait
  // failure_kind << 32 | the member it concerns; 0 while healthy.
  alignas(64) std::atomic<uint64_t> failure;
  alignas(64) std::atomic<int32_t> pids[shm_group::max_members];
  // Each member's pid namespace (pid_namespace_id()): members of one host
  // may live in namespaces of their own that share /dev/shm (containers
  // run with --ipc=host), where a peer's pid names another process or none.
  alignas(64) std::atomic<uint64_t> pid_namespaces[shm_group::max_members];
  // Barriers each member has reached, one cache line each so that arrivals
  // do not contend.
  struct alignas(64) counter {
    std::atomic<uint64_t> value;
  };
  counter arrived[shm_group::max_members];
};

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                std::atomic<uint64_t>::is_always_lock_free,
              "atomics in shared memory must be lock-free to work across processes");

namespace {

size_t header_bytes() {
  return round_up(sizeof(shm_header), 4096);
}

} // namespace

size_t shm_group::segment_bytes(int members, size_t slot_bytes) {
  // Two sets (slots of every member and a result), used by alternate
  // rounds, so a member may start the next round while others still read
  // the last one.
  return header_bytes() + 2 * (static_cast<size_t>(members) + 1) * slot_bytes;
}

shm_segment shm_group::create_host_segment(int members) {
  return create_segment(ipc::fresh_segment_name("data-"), members, host_slot_bytes);
}

shm_segment shm_group::open_host_segment(const std::string& name, int members) {
  return shm_segment::open(name, segment_bytes(members, host_slot_bytes));
}

shm_spin_times shm_spin_times::polling() {
  return {peer_poll_time, peer_poll_time};
}

shm_segment shm_group::create_segment(const std::string& name, int members, size_t slot_bytes) {
  if (members < 2 || members > max_members)
    throw backend_error("a shared-memory group needs 2 to " + std::to_string(max_members) +
                        " members, not " + std::to_string(members));
  auto segment = shm_segment::create(name, segment_bytes(members, slot_bytes));
  // The pages are zero: every atomic starts at 0 (lock-free atomics of a
  // zero bit pattern are valid), only the description is written.
  auto* h = new (segment.data()) shm_header;
  h->members = static_cast<uint64_t>(members);
  h->slot_bytes = slot_bytes;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = segment_magic;
  return segment;
}

shm_group::shm_group(shm_segment segment, int member, int members,
                     std::chrono::milliseconds timeout, spin_times spin)
    : segment_(std::move(segment)),
      header_(static_cast<shm_header*>(segment_.data())),
      member_(member),
      members_(members),
      slot_bytes_(header_->slot_bytes),  // read once: what is checked is what is used
      timeout_(timeout),
      spin_(spin) {
  // Any process of the job's user can write the header: a slot size that
  // is 0 (no progress), or so large that the layout's product wraps, would
  // take this process's copies anywhere.
  if (header_->magic != segment_magic || header_->members != static_cast<uint64_t>(members) ||
      members < 2 || members > max_members || member < 0 || member >= members ||
      slot_bytes_ < 64 || slot_bytes_ > segment_.size() ||
      segment_.size() != segment_bytes(members, slot_bytes_))
    throw backend_error("shared memory segment " + segment_.name() + " is not a group of " +
                        std::to_string(members) + " members (as member " +
                        std::to_string(member) + ")");
  header_->pid_namespaces[member_].store(pid_namespace_id());
  header_->pids[member_].store(static_cast<int32_t>(::getpid()));
  barrier(spin_.round);
  segment_.unlink();
}

shm_group::~shm_group() {
  fail(closed, member_);
}

void shm_group::abort() {
  fail(aborted, member_);
}

void shm_group::fail(uint32_t kind, int member) {
  uint64_t none = healthy;
  header_->failure.compare_exchange_strong(
    none, uint64_t{kind} << 32 | static_cast<uint32_t>(member));
  header_->wake_seq.fetch_add(1);
  futex_wake_all(&header_->wake_seq);
}

void shm_group::throw_failure() const {
  const uint64_t failure = header_->failure.load();
  const auto who = static_cast<int>(failure & 0xffffffffu);
  const auto what = "shared-memory " + std::string(running_);
  if (who < 0 || who >= members_)  // only a process writing into the segment makes one
    throw backend_error(what + " failed (an unreadable failure word " +
                        std::to_string(failure) + " in the segment)");
  const auto local = "local rank " + std::to_string(who) + " of this host's shared segment";
  const auto failed = what + " failed: ";
  switch (failure >> 32) {
    case aborted:
      throw backend_error(what + " was aborted: a peer of the process set was lost");
    case closed:
      throw backend_error(failed + local + " closed its side (reset, shutdown or set removed)");
    case exited:
      throw backend_error(failed + "the process of " + local + " (pid " +
                          std::to_string(header_->pids[who].load()) + ") exited");
    case timed_out:
      throw backend_error(failed + local + " did not arrive within " +
                          std::to_string(timeout_.count()) + " ms");
    case cross_failed:
      throw backend_error(failed + "the cross-host allreduce of " + local +
                          " failed");
    default:
      throw backend_error(what + " failed");
  }
}

bool shm_group::all_arrived(uint64_t target) const {
  for (int m = 0; m < members_; ++m)
    if (header_->arrived[m].value.load(std::memory_order_acquire) < target)
      return false;
  return true;
}

void shm_group::barrier(std::chrono::microseconds spin) {
  // A failed group takes no new arrivals; a barrier every member reached
  // before the failure still completes (below), as a collective that a
  // member finished before it closed its side.
  if (header_->failure.load() != healthy)
    throw_failure();
  const uint64_t target = ++barriers_;
  header_->arrived[member_].value.store(target, std::memory_order_release);
  header_->wake_seq.fetch_add(1);
  if (header_->sleepers.load() > 0)
    futex_wake_all(&header_->wake_seq);
  wait_for(target, spin);
}

void shm_group::wait_for(uint64_t target, std::chrono::microseconds spin) {
  const auto settled = [&] {
    return all_arrived(target) ||
           header_->failure.load(std::memory_order_relaxed) != healthy;
  };
  if (ipc::poll_for(settled, spin)) {
    if (all_arrived(target))
      return;
    throw_failure();
  }
  const auto deadline = clock::now() + timeout_;
  auto next_check = clock::now() + liveness_period;
  for (;;) {
    // Read before the checks: an arrival or failure after them changes it,
    // and the futex then does not sleep.
    const uint32_t seq = header_->wake_seq.load();
    if (all_arrived(target))
      return;
    if (header_->failure.load() != healthy)
      throw_failure();
    const auto now = clock::now();
    if (now >= next_check) {
      check_members_alive();
      next_check = now + liveness_period;
    }
    if (now >= deadline && !all_arrived(target)) {
      int late = 0;
      while (late < members_ && header_->arrived[late].value.load() >= target)
        ++late;
      if (late == members_)
        continue;  // the last one arrived just now
      fail(timed_out, late);
      throw_failure();
    }
    header_->sleepers.fetch_add(1);
    futex_wait(&header_->wake_seq, seq, std::min(deadline, next_check) - now);
    header_->sleepers.fetch_sub(1);
  }
}

void shm_group::check_members_alive() {
  // Members of other pid namespaces are left to the control plane, which
  // sees a lost peer within its heartbeat timeout.
  for (int m = 0; m < members_; ++m) {
    const int32_t pid = header_->pids[m].load();
    if (pid != 0 && header_->pid_namespaces[m].load() == pid_namespace_id() &&
        !ipc::process_alive(pid))
      fail(exited, m);
  }
}

char* shm_group::slot(int parity, int member) const {
  return static_cast<char*>(segment_.data()) + header_bytes() +
         (static_cast<size_t>(parity) * (members_ + 1) + member) * slot_bytes_;
}

char* shm_group::result(int parity) const {
  return slot(parity, members_);
}

int shm_group::next_parity() {
  const int p = parity_;
  parity_ ^= 1;
  return p;
}

std::chrono::microseconds shm_group::spin_for(size_t bytes) const {
  return bytes <= tiny_round_bytes ? spin_.tiny_round : spin_.round;
}

namespace {

// The concatenation of a list of pieces, addressed by byte offsets.
class piece_view {
public:
  explicit piece_view(piece_span pieces) : pieces_(pieces) {
    for (const auto& p : pieces_) {
      if (pieces_.size() > 1)
        starts_.push_back(total_);
      total_ += p.bytes;
    }
  }
  size_t bytes() const {
    return total_;
  }
  // Calls f(result address, input address, offset from `at`, bytes) for
  // each part of [at, at + len) that lies in one piece, in order (empty
  // pieces give empty parts).
  template <class F>
  void each(size_t at, size_t len, F&& f) const {
    if (len == 0)
      return;
    const auto part = [&](const buffer_piece& p, size_t in, size_t off, size_t n) {
      const auto* input = static_cast<const char*>(p.input != nullptr ? p.input : p.data);
      f(static_cast<char*>(p.data) + in, input + in, off, n);
    };
    if (pieces_.size() == 1) {
      part(pieces_[0], at, 0, len);
      return;
    }
    size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), at) -
                                   starts_.begin()) - 1;
    for (size_t done = 0; done < len; ++i) {
      const size_t in = at + done - starts_[i];
      const size_t n = std::min(pieces_[i].bytes - in, len - done);
      part(pieces_[i], in, done, n);
      done += n;
    }
  }
  // This rank's contribution to [at, at + len), into `to`.
  void copy_out(size_t at, size_t len, char* to) const {
    each(at, len, [&](char*, const char* in, size_t off, size_t n) {
      std::memcpy(to + off, in, n);
    });
  }
  // The result of [at, at + len), from `from`.
  void copy_in(size_t at, size_t len, const char* from) const {
    each(at, len, [&](char* out, const char*, size_t off, size_t n) {
      std::memcpy(out, from + off, n);
    });
  }

private:
  piece_span pieces_;
  std::vector<size_t> starts_;  // of each piece, when there are several
  size_t total_ = 0;
};

// Blocks of `bytes[k]` bytes back to back: where each starts, the largest,
// and the slice of block k a round of `width` bytes from `done` carries.
struct block_layout {
  std::vector<size_t> bytes, at;
  size_t most = 0;

  explicit block_layout(std::vector<size_t> sizes) : bytes(std::move(sizes)), at(bytes.size()) {
    for (size_t k = 0, s = 0; k < bytes.size(); s += bytes[k], ++k) {
      at[k] = s;
      most = std::max(most, bytes[k]);
    }
  }
  size_t slice(size_t k, size_t done, size_t width) const {
    return done < bytes[k] ? std::min(width, bytes[k] - done) : size_t{0};
  }
};

} // namespace

void shm_group::allreduce(void* data, size_t count, size_t element_bytes,
                          element_reduction reduce, const cross_step& cross,
                          const element_finish& finish) {
  allreduce(buffer_piece{data, count * element_bytes}, element_bytes, reduce, cross, finish);
}

void shm_group::allreduce(piece_span pieces, size_t element_bytes,
                          element_reduction reduce, const cross_step& cross,
                          const element_finish& finish) {
  // Up to this, every member reduces a whole round itself: one wait per
  // round instead of two. Above it, reading the others' shares once beats
  // the second wait (two members, 1 MiB: 206 -> 152 us, docs/benchmarks.md).
  constexpr size_t whole_round_bytes = size_t{16} << 10;
  running_ = "allreduce";
  const piece_view mine(pieces);
  const size_t count = mine.bytes() / element_bytes;
  const size_t per_round = slot_bytes_ / element_bytes;
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(per_round, count - done);
    const size_t base = done * element_bytes;
    const size_t end = n * element_bytes;
    done += n;
    const int p = next_parity();
    // A piece's part of the round reduced into `out` from each member's
    // `input(m, off)` (`off`: the part's offset in the round).
    const auto reduce_part = [&](char* out, size_t off, size_t bytes, const auto& input) {
      reduce_in_member_order(out, bytes / element_bytes, reduce, members_,
                             [&](int m) { return input(m, off); });
    };
    if (!cross && end <= whole_round_bytes) {
      mine.copy_out(base, end, slot(p, member_));
      barrier(spin_for(end));
      // Same order on every member: bitwise the same result everywhere.
      mine.each(base, end, [&](char* at, const char*, size_t off, size_t bytes) {
        reduce_part(at, off, bytes, [&](int m, size_t o) { return slot(p, m) + o; });
        if (finish)
          finish(at, bytes / element_bytes);
      });
      continue;
    }
    // Reduce-scatter over the members, the other hosts, then every member
    // copies the others' shares of the result. A member's slot holds only
    // what the others reduce: its own share it reads from its pieces.
    const size_t lo = n * static_cast<size_t>(member_) / members_ * element_bytes;
    const size_t hi = n * static_cast<size_t>(member_ + 1) / members_ * element_bytes;
    mine.copy_out(base, lo, slot(p, member_));
    mine.copy_out(base + hi, end - hi, slot(p, member_) + hi);
    barrier(spin_.round);
    char* out = result(p);
    mine.each(base + lo, hi - lo, [&](char*, const char* in, size_t off, size_t bytes) {
      reduce_part(out + lo + off, lo + off, bytes, [&](int m, size_t o) -> const char* {
        return m == member_ ? in : slot(p, m) + o;
      });
    });
    if (cross) {
      try {
        cross(out + lo, (hi - lo) / element_bytes);
      } catch (...) {
        fail(cross_failed, member_);
        throw;
      }
    }
    if (finish)
      finish(out + lo, (hi - lo) / element_bytes);
    mine.copy_in(base + lo, hi - lo, out + lo);
    barrier(spin_.round);
    mine.copy_in(base, lo, out);
    mine.copy_in(base + hi, end - hi, out + hi);
  }
}

void shm_group::reduce_scatter(const void* input, void* output,
                               const std::vector<size_t>& counts, size_t element_bytes,
                               element_reduction reduce, const element_finish& finish) {
  running_ = "reducescatter";
  const auto n = static_cast<size_t>(members_);
  // Part k of member m's slot holds a slice of m's input for share k: a
  // multiple of 64 bytes, so of every element size.
  const size_t part = slot_bytes_ / n / 64 * 64;
  if (counts.size() != n || part == 0)
    throw backend_error("shared-memory reduce-scatter: " + std::to_string(counts.size()) +
                        " shares for a group of " + std::to_string(members_) + " in slots of " +
                        std::to_string(slot_bytes_) + " bytes");
  std::vector<size_t> bytes;
  for (auto c : counts)
    bytes.push_back(c * element_bytes);
  const block_layout shares(std::move(bytes));
  const auto* in = static_cast<const char*>(input);
  auto* out = static_cast<char*>(output);
  const auto me = static_cast<size_t>(member_);
  for (size_t done = 0; done < shares.most; done += part) {
    const int p = next_parity();
    for (size_t k = 0; k < n; ++k)
      if (const size_t c = shares.slice(k, done, part); k != me && c > 0)
        std::memcpy(slot(p, member_) + k * part, in + shares.at[k] + done, c);
    barrier(spin_for(std::min(part, shares.most - done)));
    const size_t c = shares.slice(me, done, part);
    if (c == 0)
      continue;
    char* o = out + done;
    reduce_in_member_order(o, c / element_bytes, reduce, members_, [&](int m) -> const char* {
      return m == member_ ? in + shares.at[me] + done : slot(p, m) + me * part;
    });
    if (finish)
      finish(o, c / element_bytes);
  }
}

// Every round of these writes slots of one parity before its barrier and
// reads them after it, before the next round's barrier: as for allreduce,
// nobody writes a slot that another member may still read.

void shm_group::broadcast(void* data, size_t bytes, int root) {
  running_ = "broadcast";
  if (root < 0 || root >= members_)
    throw backend_error("shared-memory broadcast: root " + std::to_string(root) +
                        " is not a member of this host's group of " + std::to_string(members_));
  auto* at = static_cast<char*>(data);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(slot_bytes_, bytes - done);
    const int p = next_parity();
    if (member_ == root)
      std::memcpy(slot(p, root), at + done, n);
    barrier(spin_for(n));
    if (member_ != root)
      std::memcpy(at + done, slot(p, root), n);
    done += n;
  }
}

void shm_group::allgather(const void* input, void* output, const std::vector<size_t>& bytes) {
  running_ = "allgather";
  if (bytes.size() != static_cast<size_t>(members_))
    throw backend_error("shared-memory allgather: " + std::to_string(bytes.size()) +
                        " sizes for a group of " + std::to_string(members_));
  const block_layout blocks(bytes);
  const auto* in = static_cast<const char*>(input);
  auto* out = static_cast<char*>(output);
  const auto me = static_cast<size_t>(member_);
  for (size_t done = 0; done < blocks.most; done += slot_bytes_) {
    const int p = next_parity();
    if (const size_t n = blocks.slice(me, done, slot_bytes_); n > 0)
      std::memcpy(slot(p, member_), in + done, n);
    barrier(spin_for(std::min(slot_bytes_, blocks.most - done)));
    for (size_t m = 0; m < bytes.size(); ++m)
      if (const size_t n = blocks.slice(m, done, slot_bytes_); m != me && n > 0)
        std::memcpy(out + blocks.at[m] + done, slot(p, static_cast<int>(m)), n);
  }
  // Last: the others' parts were read from the slots, never from `input`.
  if (bytes[me] > 0 && out + blocks.at[me] != in)
    std::memmove(out + blocks.at[me], in, bytes[me]);
}

void shm_group::alltoall(const void* input, const std::vector<size_t>& send_bytes,
                         void* output, const std::vector<size_t>& recv_bytes) {
  running_ = "alltoall";
  const auto n = static_cast<size_t>(members_);
  // A round carries a part of this width from every member to every other:
  // part k of member m's slot is for member k.
  const size_t part = slot_bytes_ / n / 64 * 64;
  if (send_bytes.size() != n || recv_bytes.size() != n || part == 0)
    throw backend_error("shared-memory alltoall: " + std::to_string(send_bytes.size()) + " and " +
                        std::to_string(recv_bytes.size()) + " sizes for a group of " +
                        std::to_string(members_) + " in slots of " + std::to_string(slot_bytes_) +
                        " bytes");
  const auto me = static_cast<size_t>(member_);
  std::vector<size_t> send_at(n), recv_at(n);
  uint64_t need = 0;  // rounds this member's blocks take
  for (size_t k = 0, s = 0, r = 0; k < n; s += send_bytes[k], r += recv_bytes[k], ++k) {
    send_at[k] = s;
    recv_at[k] = r;
    if (k != me)
      need = std::max<uint64_t>(need, (std::max(send_bytes[k], recv_bytes[k]) + part - 1) / part);
  }
  // Every member takes part in every round, but knows only its own blocks:
  // the members agree on the most any of them needs first.
  int p = next_parity();
  std::memcpy(slot(p, member_), &need, sizeof need);
  barrier(spin_.tiny_round);
  uint64_t rounds = 0;
  for (int m = 0; m < members_; ++m) {
    uint64_t theirs;
    std::memcpy(&theirs, slot(p, m), sizeof theirs);
    rounds = std::max(rounds, theirs);
  }
  const auto* in = static_cast<const char*>(input);
  auto* out = static_cast<char*>(output);
  const auto chunk = [&](size_t bytes, size_t at) {
    return at < bytes ? std::min(part, bytes - at) : size_t{0};
  };
  for (uint64_t j = 0; j < rounds; ++j) {
    const size_t at = j * part;
    p = next_parity();
    for (size_t k = 0; k < n; ++k)
      if (const size_t c = chunk(send_bytes[k], at); k != me && c > 0)
        std::memcpy(slot(p, member_) + k * part, in + send_at[k] + at, c);
    barrier(spin_for(part));
    for (size_t k = 0; k < n; ++k)
      if (const size_t c = chunk(recv_bytes[k], at); k != me && c > 0)
        std::memcpy(out + recv_at[k] + at, slot(p, static_cast<int>(k)) + me * part, c);
  }
  // Last: the others' blocks were read from the slots, never from `input`.
  if (const size_t own = std::min(send_bytes[me], recv_bytes[me]);
      own > 0 && out + recv_at[me] != in + send_at[me])
    std::memmove(out + recv_at[me], in + send_at[me], own);
}

void shm_group::sync() {
  running_ = "barrier";
  barrier(spin_.tiny_round);
}

} // namespace troupe::backends
