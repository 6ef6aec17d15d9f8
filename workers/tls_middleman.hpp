#pragma once

// Included from control_plane.cpp only (CAF headers).

#include <chrono>

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

namespace troupe::workers {

/// A middleman actor (publish, connect) whose connections are TLS sessions
/// of CAF's OpenSSL module, configured as openssl::manager is (the module
/// must be loaded). Unlike the module's own actor it empties OpenSSL's
/// per-thread error queue around every TLS call: CAF 0.17.6 leaves a failed
/// handshake's errors there, and the next read of any healthy connection on
/// the I/O thread then reports them as its own failure, so one stranger
/// connecting to a rank would disconnect its peers. An accepted connection
/// that has not completed its TLS handshake and sent its first BASP bytes
/// within 5 s is closed, and a listening socket closes new connections at
/// once while 64 of its connections are that far behind (a peer that
/// connects and stays silent held a descriptor and an SSL object for
/// good). Stop it with stop_tls_middleman before the actor system goes.
/// A TCP handshake that has not completed within `connect_timeout` (an
/// address that drops SYNs) fails then, instead of blocking the actor, and
/// everything queued behind it, for the kernel's retries (about 130 s).
caf::io::middleman_actor spawn_tls_middleman(caf::actor_system& sys,
                                             std::chrono::milliseconds connect_timeout);

/// Kills the actor (and the one timing its handshakes) and waits until
/// both are gone.
void stop_tls_middleman(caf::actor_system& sys, caf::io::middleman_actor& actor);

} // namespace troupe::workers
