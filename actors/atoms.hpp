#pragma once

// CAF glue shared by every actor of a rank: atoms and the local-only payload
// types. Include only from .cpp files: CAF headers are expensive.

#include <caf/all.hpp>

#include "actors/tensor_entry.hpp"
#include "troupe/status.hpp"

namespace troupe::actors {

// Framework thread -> negotiator of the process set (runtime::submit).
using submit_atom = caf::atom_constant<caf::atom("submit")>;
// Negotiator to itself: send the requests collected so far.
using flush_atom = caf::atom_constant<caf::atom("flush")>;
// Negotiator -> coordinator or its control-tree parent (RequestList
// bytes), across processes.
using request_atom = caf::atom_constant<caf::atom("request")>;
// Coordinator -> a member: its place in the set's control tree, once.
using tree_atom = caf::atom_constant<caf::atom("tree")>;
// Coordinator -> every member's negotiator (ResponseList bytes), across
// processes.
using response_atom = caf::atom_constant<caf::atom("response")>;
// A set starts: the supervisor of the coordinator's rank -> every member's
// supervisor -> negotiator (the coordinator's handle), once.
using coordinator_atom = caf::atom_constant<caf::atom("coord")>;
// Negotiator -> backend, and the backend's completion reply.
using execute_atom = caf::atom_constant<caf::atom("execute")>;
using executed_atom = caf::atom_constant<caf::atom("executed")>;
// Backend -> itself: look again at the works its device is still running.
using poll_atom = caf::atom_constant<caf::atom("poll")>;
// Backend: build the communicator (blocking rendezvous).
using connect_atom = caf::atom_constant<caf::atom("connect")>;
// Bootstrap: a peer introduces its endpoint; wait for all peers; start.
// Also a negotiator introducing itself to its coordinator.
using hello_atom = caf::atom_constant<caf::atom("hello")>;
using peers_atom = caf::atom_constant<caf::atom("peers")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
// A process's directory: a supervisor enters its epoch; peers look it up.
using enter_atom = caf::atom_constant<caf::atom("enter")>;
using lookup_atom = caf::atom_constant<caf::atom("lookup")>;
// Process-set registry: register or remove a set (collective).
using add_set_atom = caf::atom_constant<caf::atom("add_set")>;
using remove_set_atom = caf::atom_constant<caf::atom("remove_set")>;
// Supervisor: stop this rank's part of a removed process set.
using stop_atom = caf::atom_constant<caf::atom("stop")>;
// A peer leaves cleanly (shutdown) rather than being lost.
using bye_atom = caf::atom_constant<caf::atom("bye")>;
// A rank was lost (seen by a neighbour in the control connections, passed
// along the control tree).
using lost_atom = caf::atom_constant<caf::atom("lost")>;
// A rank's supervisor, passed up the control tree so that every ancestor
// can route to it (see supervisor.cpp).
using route_atom = caf::atom_constant<caf::atom("route")>;
// The job moves to a new membership epoch (in-place reset).
using reset_atom = caf::atom_constant<caf::atom("reset")>;
// The set is broken: fail everything pending with the given status.
using abort_atom = caf::atom_constant<caf::atom("abort")>;
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;
// An event for the timeline actor; starting and stopping its file
// (start_timeline / stop_timeline), and telling the negotiator to trace.
using timeline_atom = caf::atom_constant<caf::atom("timeline")>;
using tl_start_atom = caf::atom_constant<caf::atom("tl_start")>;
using tl_stop_atom = caf::atom_constant<caf::atom("tl_stop")>;
using tracing_atom = caf::atom_constant<caf::atom("tracing")>;
// Coordinator's periodic stall check.
using stall_atom = caf::atom_constant<caf::atom("stall")>;
// Coordinator: the minimum cycle time (TROUPE_CYCLE_TIME) has elapsed.
using cycle_atom = caf::atom_constant<caf::atom("cycle")>;
// Coordinator: a pending tensor's deadline (Request.deadline_ms) is due.
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
// Coordinator: the list_stats of the lists executed since the last
// settings change (what a tuner scores).
using stats_atom = caf::atom_constant<caf::atom("stats")>;
// Negotiator: send a settings change (troupe.v1.Tuning bytes) to the
// coordinator with the next request list. Tuner -> coordinator: apply this
// change at the next response list.
using tune_atom = caf::atom_constant<caf::atom("tune")>;
// Negotiator: send the application's settings of the previous epoch
// (troupe.v1.Tuning bytes) with the next request list, as
// RequestList.restored (after a reset).
using restore_atom = caf::atom_constant<caf::atom("restore")>;

/// A set already aborted is aborted again only when a peer is lost after a
/// clean goodbye: work still running may then never return.
inline bool abort_escalates(const status& current, const status& next) {
  return next.code() == status_code::peer_lost && current.code() != status_code::peer_lost;
}

} // namespace troupe::actors

// Local-only payloads: they never cross a process boundary (remote messages
// carry protobuf bytes in std::string).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::submitted_batch_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::collective_work_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::list_stats)
