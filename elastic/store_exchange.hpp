#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "elastic/store.hpp"

namespace troupe::elastic {

/// An exchange given up before every rank arrived because the key it was
/// told to watch appeared (troupe-run opened the next epoch's reset
/// barrier): the missing ranks will not come. what() names the key and
/// holds its value.
class exchange_abandoned : public store_error {
public:
  using store_error::store_error;
};

// Collective exchanges of a job's ranks through the store, costing each rank
// a constant number of store operations whatever the job's size: a
// bootstrap that did one operation per peer and rank was O(N^2) operations
// through the store's one thread (34 s at 512 ranks, issue 17). Every key
// is under `prefix`, which must be fresh for each exchange (it holds a
// count of the ranks that arrived).

/// Counts this rank in under `prefix` and waits until all `size` ranks
/// have: one add and one wait per rank (the last to arrive sets the key
/// everyone waits for). Throws store_error naming how many arrived when
/// `timeout` passes first. With `abandon`, the wait is cut into slices
/// (50 ms, doubling up to 1 s) with a get() of that key between them, and
/// throws exchange_abandoned once it exists while ranks are still missing.
void arrive_and_wait(store_client& store, const std::string& prefix, int size,
                     std::chrono::milliseconds timeout,
                     const std::optional<std::string>& abandon = std::nullopt);

/// After each rank set its value at `values_prefix` + its rank: counts
/// this rank in under `arrival_prefix` (arrive_and_wait) and returns every
/// rank's value, indexed by rank, from one listing. Throws store_error
/// naming a rank that arrived without its value, exchange_abandoned as
/// arrive_and_wait does.
std::vector<std::string> gather_published(
  store_client& store, const std::string& values_prefix, const std::string& arrival_prefix,
  int size, std::chrono::milliseconds timeout,
  const std::optional<std::string>& abandon = std::nullopt);

/// Rank `rank` of `size` sends `to_peer[p]` to every peer p (its own entry
/// is ignored) and returns what each peer sent it, indexed by rank (its own
/// entry empty): one set of the non-empty entries' keys (an empty entry
/// is not stored: a sparse exchange, such as ring neighbours', costs keys
/// for its entries only), the arrival count, one listing of the values
/// addressed to it. O(N) bytes per rank, where each rank publishing one
/// value that holds all its peers' entries (Gloo's full-mesh rendezvous)
/// makes every rank read O(N^2).
std::vector<std::string> all_to_all(store_client& store, const std::string& prefix, int rank,
                                    int size, const std::vector<std::string>& to_peer,
                                    std::chrono::milliseconds timeout);

} // namespace troupe::elastic
