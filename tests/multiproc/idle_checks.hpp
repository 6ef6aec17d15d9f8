#pragma once

namespace troupe::test {

/// After a few checked allreduces, counts how often the runtime's own
/// threads (CAF's, the control channel's readers) wake while nothing is
/// submitted: an idle rank must sleep, not poll. Prints one PASS or FAIL
/// line with each thread's wake-ups; returns the process exit code.
int run_idle_wakeup_check(int rank, int size);

} // namespace troupe::test
