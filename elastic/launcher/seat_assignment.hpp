#pragma once

#include "elastic/elastic_plan.hpp"
#include "elastic/launcher/host_plan.hpp"

#include <vector>

// Who runs where in an elastic job's next membership epoch. Pure
// functions, so the rules are unit-tested without spawning anything.
namespace troupe::elastic::launcher {

/// A seat of the next epoch: a surviving worker, or a new one to start
/// (worker_id == new_seat).
constexpr int64_t new_seat = -1;

/// The next epoch's seats, in rank order, from the usable hosts (oldest
/// first) and the surviving members (rank order): survivors keep their
/// seats while their host is usable and has slots for them (the highest
/// ranks of a host that shrank leave first); then free slots are filled
/// with new seats, host by host, up to `max_np` seats in all. Ranks go
/// host by host, hosts with survivors first and in age order, survivors
/// before new seats on a host, so rank 0 is the oldest surviving host's
/// first survivor: the one state is synced from.
membership_plan assign_seats(const std::vector<host_spec>& usable,
                             const membership_plan& survivors, int max_np);

/// How `next` differs from `current`: removed when a member of `current`
/// has no seat in it, added when it has a new seat.
host_change compare_plans(const membership_plan& current, const membership_plan& next);

/// The identity variables of each seat of `plan` (its hosts are
/// contiguous, as assign_seats makes them).
std::vector<rank_slot> slots_of(const membership_plan& plan);

} // namespace troupe::elastic::launcher
