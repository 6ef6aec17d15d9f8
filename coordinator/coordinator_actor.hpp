#pragma once

// Include only from .cpp files: CAF headers are expensive.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "actors/protocols.hpp"
#include "coordinator/stall_inspector.hpp"
#include "coordinator/tuner_actor.hpp"

namespace troupe::metrics {
class set_metrics;
}

namespace troupe::control {
class channel_host;
}

namespace troupe::coordinator {

/// How a coordinator batches and caches.
struct coordinator_options {
  stall_options stall;
  /// Bytes of allreduces fused into one collective; 0 = no fusion.
  int64_t fusion_threshold = 0;
  /// Response cache entries; 0 = no cache.
  size_t cache_capacity = 0;
  /// Minimum time between two response lists; 0 = event-driven only.
  std::chrono::microseconds cycle_time{0};
  /// The membership epoch: stamped on every response list sent.
  int64_t epoch = 0;
  /// With autotuning: the tuner the coordinator spawns and reports to.
  std::optional<tuner_options> autotune = std::nullopt;
  /// Children per node of the set's control tree (control_tree.hpp): the
  /// coordinator sends response lists to set rank 0 and the root's children
  /// only, which pass them down their subtrees. 0: a star (every member).
  int32_t tree_fanout = 0;
  /// The set's shared-memory control channel on this host (null: none);
  /// the coordinator owns it from then on.
  std::shared_ptr<control::channel_host> control = nullptr;
  /// Tensors fuse only with members of the same grouped call, never across
  /// calls (Horovod's HOROVOD_DISABLE_GROUP_FUSION).
  bool disable_group_fusion = false;
};

/// Spawns the coordinator of one process set of `set_size` members (on the
/// set's lowest rank); protocol: actors::coordinator_actor. Every member
/// introduces its negotiator, (hello, set rank, handle, on the channel),
/// then sends (request, epoch, set id, RequestList bytes) directly; one
/// from another membership epoch is refused. The coordinator decides what
/// runs and in which order, and sends one ResponseList to every member as
/// (response, epoch, set id, bytes), once every member has introduced
/// itself. Members that opened `options.control` exchange the same lists
/// through it: the coordinator writes each list once for all of them, and
/// the channel's reader thread turns what they write into (request, ...)
/// messages to the coordinator.
///
/// Readiness is event-driven: a ready tensor is sent at once when the
/// previous response list has been executed on this rank (reported by the
/// local negotiator as (executed)); tensors that become ready meanwhile are
/// batched into the next list, where allreduces are fused (see proto/fusion.hpp)
/// up to `fusion_threshold` bytes.
///
/// With a response cache, members send a cached tensor's id instead of its
/// request; each emitted list tells members the ids it assigned.
///
/// With `autotune`, the coordinator spawns the set's tuner (see
/// tuner_actor.hpp), tells it every list executed on this rank with the
/// number of settings changes applied so far and whether the list began a
/// training step (autotune::step_detector, on the names of the tensors it
/// emitted; only while the tuner runs), and applies the changes it sends
/// like any member's.
///
/// The stall inspector runs here: tensors some members never submit are
/// reported (warning naming them and the missing ranks) and, past the
/// shutdown time, failed on the ranks that did submit them. `metrics` (the
/// set's, required) gets the stall counts and the coordinator's mailbox
/// depth.
actors::coordinator_actor spawn_coordinator(caf::actor_system& sys, uint32_t process_set_id,
                                            int32_t set_size, const coordinator_options& options,
                                            std::shared_ptr<metrics::set_metrics> metrics);

} // namespace troupe::coordinator
