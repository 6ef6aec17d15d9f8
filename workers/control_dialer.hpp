#pragma once

// Opens this rank's control connections to other ranks' directories.
// Included from .cpp files only (CAF headers).

#include <chrono>
#include <cstdint>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

#include <troupe/status.hpp>

#include "control/control_links.hpp"

namespace troupe::workers {

/// One membership epoch's view of where every rank listens, and the
/// connections between them (control::control_links). Blocking: call it
/// from the runtime's thread or a detached actor only.
class control_dialer {
public:
  using clock = std::chrono::steady_clock;

  control_dialer(caf::actor_system& sys, caf::io::middleman_actor connections, int32_t rank,
                 std::vector<control::published_endpoint> endpoints,
                 control::control_links links);

  /// `peer`'s directory into `directory`, connecting to it unless the
  /// middleman already has (CAF keeps one connection per host and port). A
  /// handshake can time out on a loaded host (seen with 6 ranks on 2 cores)
  /// while the peer listens, so a failed attempt is retried, backing off
  /// from 50 ms to 1 s (each attempt is another handshake for a busy peer),
  /// until `deadline`; then status_code::peer_lost naming the rank and its
  /// address.
  status dial(int32_t peer, clock::time_point deadline, caf::actor& directory) const;

  /// Connects to the ranks this one exchanges messages with directly in a
  /// process set of `members` other than the global one
  /// (control_links::set_contacts); nothing on a mesh.
  status dial_set(const std::vector<int>& members, clock::time_point deadline) const;

  const control::published_endpoint& endpoint(int32_t rank) const {
    return endpoints_.at(static_cast<size_t>(rank));
  }

private:
  caf::actor_system& sys_;
  caf::io::middleman_actor connections_;
  int32_t rank_;
  std::vector<control::published_endpoint> endpoints_;
  control::control_links links_;
};

} // namespace troupe::workers
