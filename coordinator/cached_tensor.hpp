#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "troupe/v1/control.pb.h"

namespace troupe::coordinator {

/// One member's request, shared: the requests a control-tree node merged
/// for a range of ranks are one object in every slot of the range.
using request_ptr = std::shared_ptr<const v1::Request>;
/// Requests by set rank (null: none, e.g. a joined rank).
using requests = std::vector<request_ptr>;

/// A tensor whose negotiation succeeded, as the response cache holds it:
/// every member's request, agreed when it entered the cache. Immutable, so
/// the message table can hold it while the cache moves on; a member that
/// names it by id is not checked again.
struct cached_tensor {
  std::string name;
  // Every member's, by set rank: none is empty (a tensor a joined rank
  // never sent is not cached).
  requests by_rank;
};

using cached_tensor_ptr = std::shared_ptr<const cached_tensor>;

} // namespace troupe::coordinator
