#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "troupe/handle.hpp"
#include "troupe/types.hpp"
#include "troupe/v1/control.pb.h"

namespace troupe::actors {

/// One submitted collective on this rank: what was asked (the request the
/// coordinator sees), the caller's memory, and the caller's handle.
struct tensor_entry {
  uint32_t process_set_id = 0;
  v1::Request request;
  tensor input;
  tensor output;
  /// Alltoall: rows sent to each rank (empty = equal split). Not
  /// negotiated, as in Horovod.
  std::vector<int64_t> splits;
  /// The caller's memory for a result sized by negotiation; empty: the
  /// result goes to handle->output.
  output_allocator allocate;
  /// The caller's handle's state lives in the entry, and the caller's
  /// handle (handle_of) keeps the entry alive: an entry built on the
  /// caller's thread is then usually freed there too, when the caller lets
  /// go of the handle, and malloc's per-thread cache serves the next
  /// submission from it. (Freed on the runtime's threads, each of a step's
  /// allocations took malloc's slow path: 200 x 4 KiB, docs/benchmarks.md.)
  /// A copy of an entry reports to the original's handle (as the host
  /// copies of staging_backend do) and gets a state of its own, unused
  /// unless `handle` is pointed at it.
  struct own_state : detail::handle_state {
    own_state() = default;
    own_state(const own_state&) : detail::handle_state() {
    }
    own_state& operator=(const own_state&) = delete;
  };
  own_state state;
  detail::handle_state* handle = &state;
  /// Zeros a joined rank contributes in place of a tensor it never had.
  std::vector<char> stand_in;
  /// Why `allocate` gave no memory: the result went to handle->output
  /// instead, so that this rank still took its part in the exchange, and
  /// the collective fails here with this.
  std::string allocation_failure;
  /// Given to a backend (launch): from then on only the backend's answer
  /// completes it (or, after a backend's failure, the abort that follows:
  /// on_executed keeps it pending for that), whatever a later response says
  /// of its name. Not "running": fail_pending asks in_flight for that.
  bool launched = false;
  /// Start of negotiation (the entry is built at submission), for
  /// troupe_negotiation_duration_seconds.
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
};

using tensor_entry_ptr = std::shared_ptr<tensor_entry>;

/// The state a caller's handle on `e` shares, keeping `e` alive (for an
/// entry with a state of its own, not a copy).
inline std::shared_ptr<detail::handle_state> handle_of(const tensor_entry_ptr& e) {
  return {e, &e->state};
}

/// Entries submitted together (one, or the members of a group): accepted or
/// rejected as a whole.
using entry_batch = std::vector<tensor_entry_ptr>;

/// What fails a collective whose negotiator stopped before it took it.
inline status not_accepted() {
  return {status_code::shut_down, "The process set stopped before this collective was "
                                  "accepted (shutdown, reset or removal)."};
}

/// A batch on its way to a negotiator, which takes the entries. If the
/// message is dropped instead (the negotiator stopped first: shutdown, a
/// reset, a removed set), the last owner fails the entries' handles with
/// `if_dropped`: no caller waits for a completion that cannot come.
struct submitted_batch {
  entry_batch entries;
  status if_dropped;

  submitted_batch(entry_batch e, status s) : entries(std::move(e)), if_dropped(std::move(s)) {
  }
  submitted_batch(const submitted_batch&) = delete;
  submitted_batch& operator=(const submitted_batch&) = delete;
  ~submitted_batch() {
    for (auto& e : entries)
      e->handle->complete(if_dropped);
  }
};

using submitted_batch_ptr = std::shared_ptr<submitted_batch>;

/// Records the begin ('B') or end ('E') of a backend activity
/// (MEMCPY_IN_FUSION_BUFFER, GLOO_ALLREDUCE, ...) on every entry of a work.
using activity_trace = std::function<void(const std::string& activity, char phase)>;

/// Records a backend activity timed elsewhere (by a GPU's events) on every
/// entry of a work: it began `began_us_ago` and ended `ended_us_ago`
/// microseconds before the call.
using past_activity_trace =
  std::function<void(const std::string& activity, int64_t began_us_ago, int64_t ended_us_ago)>;

/// One coordinator response ready to run on this rank's backend, together
/// with the local entries it covers (several when fused).
struct collective_work {
  uint64_t id = 0;
  v1::Response response;
  std::vector<tensor_entry_ptr> entries;
  /// Bytes a CPU allreduce reduces at a time, as tuned at run time (none:
  /// the backend's own); the same on every member, set from the list. A
  /// CPU backend sets it to the chunk it used when it starts the work.
  std::optional<size_t> fusion_chunk_bytes;
  /// Both empty unless a timeline is being written.
  activity_trace trace;
  past_activity_trace past_trace;
};

using collective_work_ptr = std::shared_ptr<collective_work>;

/// What executed response lists moved: a tuner scores a setting by bytes
/// per second.
struct list_stats {
  uint64_t lists = 0;
  uint64_t bytes = 0;    // payload bytes on this rank (payload_bytes)
  double seconds = 0;    // backend time
  /// Bytes a CPU allreduce among them was reduced at a time (0: at once),
  /// as the backend resolved it; -1 when none ran. A tuner learns so what
  /// the configured chunk comes to.
  int64_t chunk_bytes = -1;

  list_stats& operator+=(const list_stats& o) {
    lists += o.lists;
    bytes += o.bytes;
    if (o.chunk_bytes >= 0)
      chunk_bytes = o.chunk_bytes;
    seconds += o.seconds;
    return *this;
  }
};

/// Bytes one collective moves on this rank: the gathered result for
/// allgather, the input otherwise (nccl-tests' "size").
inline uint64_t payload_bytes(const collective_work& work) {
  uint64_t bytes = 0;
  for (const auto& e : work.entries)
    bytes += work.response.op() == v1::OP_TYPE_ALLGATHER
               ? static_cast<uint64_t>(num_elements(e->handle->output_shape)) *
                   element_size(e->input.dtype)
               : e->input.size_bytes();
  return bytes;
}

} // namespace troupe::actors
