#pragma once

#include <string>
#include <utility>

namespace troupe {

/// Error categories (see docs/errors.md). Numbering matches troupe.v1.ErrorCode.
enum class status_code : int {
  ok = 0,
  invalid_argument = 1,  // bad arguments, rejected at submission
  mismatch = 2,          // ranks disagreed about a collective
  peer_lost = 3,         // a member died, froze or left: the set is broken
  shut_down = 4,         // the runtime is shut down or shutting down
  timeout = 5,
  backend = 6,           // the communication library failed
  internal = 7,
  reset = 8,             // the job is moving to a new membership epoch: retry after reset()
  removed = 9,           // elastic: the new membership has no place for this process
};

const char* to_string(status_code code);

/// Outcome of an operation: a code and, on failure, a message for humans.
class status {
public:
  status() = default;
  status(status_code code, std::string message)
    : code_(code), message_(std::move(message)) {
  }

  bool ok() const {
    return code_ == status_code::ok;
  }
  status_code code() const {
    return code_;
  }
  const std::string& message() const {
    return message_;
  }

private:
  status_code code_ = status_code::ok;
  std::string message_;
};

} // namespace troupe
