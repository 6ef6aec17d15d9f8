#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// The contract between troupe-run's elastic driver and its workers, kept in
// the rendezvous store under the job id J (elastic mode only; the driver
// owns the membership epoch there):
//
//   J/plan/<E>          members of epoch E in rank order, one "<worker id>
//                       <host>" per line; written once (compare_set: a
//                       retry adopts what is stored), before J/epoch = E;
//                       workers take it only once J/epoch names E
//   J/epoch             the newest planned epoch (membership_epoch.hpp)
//   J/arrive/<E>/<id>   worker <id> is ready to join epoch E (the reset
//                       barrier: the driver plans E once every member of
//                       E - 1 arrived, exited or was failed); the value is
//                       an arrival (below)
//   J/barrier/<E>       troupe-run opened the reset barrier of epoch E (the
//                       value says why): written before J/plan/<E>, and as
//                       soon as the barrier opens. A rank still bootstrapping
//                       epoch E - 1 that finds it while waiting for a peer's
//                       endpoint gives E - 1 up and arrives at E: the peer
//                       left, failed or is resetting, so it never publishes
//   J/notice            "<E> <kind>": troupe-run found a change of hosts
//                       while epoch E ran (kind: added, removed, mixed)
//   J/hosts             "<active> <blacklisted> <cooling down>": the hosts
//                       discovery lists, by state; rewritten when a count
//                       changes and before each plan, read by the ranks for
//                       their metrics
namespace troupe::elastic {

/// One member of an epoch: the launcher's id for the process (stable for
/// its whole life) and the host it runs on.
struct plan_member {
  int64_t worker_id = 0;
  std::string host;

  bool operator==(const plan_member& o) const {
    return worker_id == o.worker_id && host == o.host;
  }
};

using membership_plan = std::vector<plan_member>;

std::string plan_key(const std::string& job, int64_t epoch);
std::string arrive_prefix(const std::string& job, int64_t epoch);
std::string arrive_key(const std::string& job, int64_t epoch, int64_t worker_id);
std::string barrier_key(const std::string& job, int64_t epoch);
std::string notice_key(const std::string& job);

std::string encode_plan(const membership_plan& plan);
/// Throws std::invalid_argument naming the bad line.
membership_plan decode_plan(const std::string& text);

/// A worker at a reset barrier: whether it served in an epoch before (it
/// holds state a newcomer needs), and the ranks of its previous epoch it
/// lost (connection closed or silent past the heartbeat timeout).
struct arrival {
  bool veteran = false;
  std::vector<int> lost;
};

/// "1" or "0", then " r1,r2,..." when ranks were lost.
std::string encode_arrival(const arrival& a);
/// A malformed value reads as a newcomer that lost nothing.
arrival decode_arrival(const std::string& text);

/// What changed in the hosts, as the driver tells the workers.
enum class host_change { none = 0, added = 1, removed = 2, mixed = 3 };

struct notice {
  int64_t epoch = -1;  // the epoch that ran when the change was found
  host_change change = host_change::none;
};

/// Hosts by state, as troupe-run's driver counts them.
struct host_states {
  int active = 0;
  int blacklisted = 0;  // for good
  int cooling_down = 0;

  bool operator==(const host_states& o) const {
    return active == o.active && blacklisted == o.blacklisted && cooling_down == o.cooling_down;
  }
};

std::string host_states_key(const std::string& job);
std::string encode_host_states(const host_states& h);
/// Nothing for malformed text.
std::optional<host_states> decode_host_states(const std::string& text);

std::string encode_notice(const notice& n);
/// Nothing for malformed text.
std::optional<notice> decode_notice(const std::string& text);

} // namespace troupe::elastic
