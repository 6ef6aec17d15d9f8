#include "expect.hpp"

#include <cstdio>

namespace troupe::test {

namespace {
int failed = 0;
}

int failures() {
  return failed;
}

void expect(bool ok, int rank, const std::string& what) {
  if (!ok) {
    ++failed;
    std::printf("rank %d: FAIL %s\n", rank, what.c_str());
  }
}

void expect_error(const status& s, const std::string& text, int rank, const std::string& what) {
  expect(!s.ok() && s.message().find(text) != std::string::npos, rank,
         what + ": expected an error containing '" + text + "', got '" + s.message() + "'");
}

} // namespace troupe::test
