#pragma once

#include <string>

#include "workers/config.hpp"
#include "workers/identity.hpp"

namespace troupe::workers {

/// The IPv4 address a rank's listeners (its actor system's port, Gloo's
/// pairs) bind to and that peers are told to connect to; never the
/// wildcard. In order:
///  - TROUPE_NETWORK_INTERFACE: that interface's address;
///  - every rank on this host (local size = size): 127.0.0.1;
///  - otherwise the address this rank's host name resolves to (the first
///    non-loopback one, else loopback: hosts that are names of this
///    machine).
/// Throws config_error naming the interface or host when there is none.
std::string listen_address(const identity& id, const config& cfg);

/// The IPv4 address of interface `name` here; throws config_error listing
/// the interfaces there are.
std::string interface_address(const std::string& name);

} // namespace troupe::workers
