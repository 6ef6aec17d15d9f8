#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "troupe/v1/control.pb.h"

namespace troupe::coordinator {

/// A tensor whose negotiation succeeded, as the response cache holds it:
/// every member's request, agreed when it entered the cache. Immutable, so
/// the message table can hold it while the cache moves on; a member that
/// names it by id is not checked again.
struct cached_tensor {
  std::string name;
  // Every member's, by set rank: none is empty (a tensor a joined rank
  // never sent is not cached).
  std::vector<std::optional<v1::Request>> by_rank;
};

using cached_tensor_ptr = std::shared_ptr<const cached_tensor>;

} // namespace troupe::coordinator
