#pragma once

#include <string>

#include "troupe/status.hpp"

namespace troupe::test {

/// Expectations that failed so far in this process.
int failures();

/// Counts and prints "rank R: FAIL what" unless `ok`.
void expect(bool ok, int rank, const std::string& what);

/// Expects a failed status whose message contains `text`.
void expect_error(const status& s, const std::string& text, int rank, const std::string& what);

} // namespace troupe::test
