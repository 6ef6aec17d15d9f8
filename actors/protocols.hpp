#pragma once

// The typed interfaces of a rank's actors: sending a message the receiver
// does not declare, or whose answer the sender does not take, is a compile
// error. Include only from .cpp files (or .cpp-only headers): CAF headers
// are expensive.

#include <vector>

#include "actors/atoms.hpp"
#include "actors/submission_inbox.hpp"

namespace troupe::actors {

/// The detached actor that owns a process set's backend of one device kind
/// (backends/backend_actor.hpp). (execute) is answered to its sender once
/// the backend has let go of the work's buffers, or at once after (abort),
/// sent with high priority. (poll) is its own timer while works run.
using backend_actor = caf::typed_actor<
  caf::replies_to<connect_atom>::with<status>,
  caf::reacts_to<abort_atom, status>,
  caf::reacts_to<poll_atom>,
  caf::replies_to<execute_atom, collective_work_ptr>::with<executed_atom, uint64_t, status,
                                                           list_stats>>;

/// What a coordinator needs of a member: somewhere to send its response
/// lists, (response, epoch, set id, ResponseList bytes), possibly in another
/// process. In a control tree (control/control_tree.hpp) a member is also
/// a node: told its place once, (tree, parent's set rank, end of its
/// subtree, its children's set ranks, parent or null when that is the
/// coordinator, children to pass lists on to) -> true, before the
/// coordinator's first list, it passes every list on to those children and
/// takes its children's (request, epoch, set id, RequestList bytes).
using member_actor = caf::typed_actor<
  caf::reacts_to<response_atom, int64_t, uint32_t, std::string>,
  caf::reacts_to<request_atom, int64_t, uint32_t, std::string>,
  caf::replies_to<tree_atom, int32_t, int32_t, std::vector<int32_t>, caf::actor,
                  std::vector<caf::actor>>::with<bool>>;

/// The autotuner of a process set (coordinator/tuner_actor.hpp), next to its
/// coordinator: told each response list executed on that rank, (executed,
/// settings generation, whether the list began a training step, stats), and
/// each settings change of the application's (troupe::tune) as the
/// coordinator takes it, (tune, Tuning bytes).
using tuner_actor =
  caf::typed_actor<caf::reacts_to<executed_atom, uint64_t, bool, list_stats>,
                   caf::reacts_to<tune_atom, std::string>>;

/// The coordinator of a process set (coordinator/coordinator_actor.hpp).
/// Every member introduces itself once, (hello, set rank, member, whether
/// it opened the set's shared-memory control channel: then its lists come
/// and go through that, its host), before its first (request, epoch, set id,
/// RequestList bytes). (flush) retries response lists the channel could
/// not take at once. The negotiator of
/// the coordinator's own rank reports each list it executed, (executed,
/// stats); (stats) asks what the lists executed since the last settings
/// change moved. Its tuner sends settings changes, (tune, Tuning bytes).
/// Stall, cycle and deadline are its own timers.
using coordinator_actor = caf::typed_actor<
  caf::reacts_to<hello_atom, int32_t, member_actor, bool, std::string>,
  caf::reacts_to<flush_atom>,
  caf::reacts_to<request_atom, int64_t, uint32_t, std::string>,
  caf::reacts_to<executed_atom, list_stats>,
  caf::reacts_to<tune_atom, std::string>,
  caf::replies_to<stats_atom>::with<list_stats>,
  caf::reacts_to<stall_atom>,
  caf::reacts_to<cycle_atom>,
  caf::reacts_to<deadline_atom, uint64_t>>;

/// The negotiator of a process set (actors/negotiator.hpp): a member, told
/// its coordinator once, (coordinator, handle, name of the set's
/// shared-memory control channel or ""), by the supervisor.
using negotiator_actor = member_actor::extend<
  caf::reacts_to<coordinator_atom, coordinator_actor, std::string>,
  caf::reacts_to<submit_atom, submitted_batch_ptr>,
  caf::reacts_to<submit_atom>,
  caf::reacts_to<flush_atom>,
  caf::reacts_to<executed_atom, uint64_t, status, list_stats>,
  caf::reacts_to<tune_atom, std::string>,
  caf::reacts_to<restore_atom, std::string>,
  caf::reacts_to<tracing_atom, bool, bool>,
  caf::reacts_to<abort_atom, status>,
  caf::reacts_to<shutdown_atom>>;

/// Where this rank's collectives on one process set go in: its negotiator,
/// and the inbox the negotiator takes the API's submissions from.
struct set_entrance {
  negotiator_actor negotiator;
  std::shared_ptr<submission_inbox> inbox;
};

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::set_entrance)

namespace troupe::actors {

/// A rank's process-set registry (workers/process_set_registry.hpp): both
/// calls answer (status, set id).
using process_set_registry_actor = caf::typed_actor<
  caf::replies_to<add_set_atom, std::vector<int>>::with<status, int32_t>,
  caf::replies_to<remove_set_atom, int32_t>::with<status, int32_t>>;

/// What a rank's supervisor takes from its peers' supervisors: once per
/// process set, the coordinator's handle and its control channel's name,
/// (coordinator, epoch, set id, registration serial, handle, name), from
/// the set's lowest rank; (bye, rank,
/// cause, cause text) -> true when a peer leaves (shutdown or reset);
/// (lost, rank, why) when a rank was lost. With a control tree (see
/// control::control_links) a supervisor passes each of them on to its
/// other neighbours, so they reach every rank, and (route, rank, its
/// supervisor) -> true up to the root, answered once the root has it.
using peer_actor = caf::typed_actor<
  caf::reacts_to<coordinator_atom, int64_t, uint32_t, uint64_t, coordinator_actor, std::string>,
  caf::replies_to<bye_atom, int32_t, int32_t, std::string>::with<bool>,
  caf::reacts_to<lost_atom, int32_t, std::string>,
  caf::replies_to<route_atom, int32_t, caf::actor>::with<bool>>;

/// A rank's supervisor of one membership epoch (workers/supervisor.hpp):
/// a peer to the others, and what the runtime and the registry ask of it.
using supervisor_actor = peer_actor::extend<
  caf::reacts_to<hello_atom, int32_t, peer_actor, std::string>,
  caf::replies_to<peers_atom, std::vector<int32_t>>::with<bool>,
  caf::replies_to<start_atom, uint32_t, std::vector<int>, uint64_t>::with<status, set_entrance>,
  caf::replies_to<stop_atom, uint32_t>::with<bool>,
  caf::replies_to<tl_start_atom, std::string, bool>::with<status>,
  caf::replies_to<tl_stop_atom>::with<status>,
  caf::replies_to<shutdown_atom>::with<bool>,
  caf::replies_to<reset_atom, int64_t>::with<std::vector<int>>>;

/// Hands `batch` to a negotiator in a message of its own (see
/// submitted_batch).
inline void submit_batch(const negotiator_actor& negotiator, entry_batch batch) {
  caf::anon_send(negotiator, submit_atom::value,
                 std::make_shared<submitted_batch>(std::move(batch), not_accepted()));
}

/// Hands `batch` to a set through its negotiator's inbox: a message only
/// when the negotiator is not already due to look.
inline void submit_batch(const set_entrance& to, entry_batch batch) {
  if (to.inbox->put(std::move(batch)) == submission_inbox::put_result::signal)
    caf::anon_send(to.negotiator, submit_atom::value);
}

/// Whether `receiver` (of process set `set`, serving membership epoch
/// `mine`) may take a control message from epoch `theirs`. One from another
/// epoch is refused, logged naming both: its sender missed a reset, or this
/// rank did.
bool same_epoch(int64_t mine, int64_t theirs, const char* receiver, uint32_t set);

} // namespace troupe::actors
