#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/message_table.hpp"
#include "troupe/v1/control.pb.h"

namespace troupe::coordinator {

class response_cache;

/// Feeds one RequestList into a set's bookkeeping as the coordinator does:
/// full requests go to the table, cache hits (one member's, or a control
/// tree node's range of ranks) are resolved against the state their sender
/// saw and counted, then the sender's progress is recorded. Returns one
/// text per request that could not be taken (it is ignored).
std::vector<std::string> take_requests(const v1::RequestList& list, message_table& table,
                                       response_cache& cache);

/// Records a response list's outcome in the cache exactly as every member
/// will when it applies the list (number `seq`), in list order: successes
/// get (or keep) an id, written into the list's Response.cache_ids;
/// failures lose theirs. `sent` holds what the members sent, by tensor.
void record_outcome(v1::ResponseList& list,
                    std::unordered_map<std::string, message_table::sent>& sent,
                    response_cache& cache, uint64_t seq);

} // namespace troupe::coordinator
