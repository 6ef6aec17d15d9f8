#pragma once

#include <functional>
#include <string>
#include <vector>

#include "troupe/troupe.hpp"

namespace troupe::test {

/// One collective: submits, then checks its own result against a reference
/// built from every rank's seeded input.
struct check {
  std::string name;
  std::function<handle()> submit;
  std::function<std::string(const handle&)> verify;  // "" = ok
};

/// Every op x dtype x reduction (and every broadcast root).
std::vector<check> op_matrix(int rank, int size);

/// `count` small float32 allreduces.
std::vector<check> many_small(int rank, int size, int count);

/// Submits all checks in a per-rank random order, waits, verifies; prints
/// one PASS line or a FAIL line per failure, and adds the names of the
/// passed checks to `passed` when given. Returns the process exit code.
int run_checks(std::vector<check> checks, int rank, const char* what,
               std::vector<std::string>* passed = nullptr);

/// `n` float32 allreduces of one element named "<prefix>.<i>", each
/// checked: false at the first that fails.
bool allreduce_series(int rank, int size, const std::string& prefix, int n);

/// Markdown table op x dtype of what `passed` (op_matrix names) covers.
std::string support_matrix(const std::vector<std::string>& passed, const std::string& backend,
                           int size);

} // namespace troupe::test
