#pragma once

namespace troupe::test {

/// Provokes every user error (cross-rank mismatches and submission errors),
/// checks the exact message on every rank, then proves the runtime still
/// runs a correct collective. Returns the process exit code.
int run_error_checks(int rank, int size);

/// After troupe::shutdown(): every call fails cleanly. Returns an exit code.
int check_after_shutdown(int rank);

} // namespace troupe::test
