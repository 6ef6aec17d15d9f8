#pragma once

#include <csignal>
#include <string>

namespace troupe::elastic::launcher {

/// Blocks the signals troupe-run handles (SIGINT, SIGTERM, SIGHUP, SIGCHLD)
/// in the calling thread, ignores SIGPIPE, and returns a signalfd that
/// reports them. Call it before any other thread starts, so that every
/// thread inherits the mask and no handler runs asynchronously.
int open_signal_fd();

/// The signals whose mask or action troupe-run changes; spawned workers get
/// them back unblocked and at their default action.
sigset_t changed_signals();

/// "SIGTERM" for 15; "signal 99" for an unknown number.
std::string signal_name(int sig);

} // namespace troupe::elastic::launcher
