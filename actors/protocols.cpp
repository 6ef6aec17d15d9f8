#include "actors/protocols.hpp"

#include <spdlog/spdlog.h>

namespace troupe::actors {

bool same_epoch(int64_t mine, int64_t theirs, const char* receiver, uint32_t set) {
  if (theirs == mine)
    return true;
  spdlog::error("troupe {} of process set {}: refused a message from membership epoch {}; "
                "this rank is at epoch {} (the sender missed a reset, or this rank did)",
                receiver, set, theirs, mine);
  return false;
}

} // namespace troupe::actors
