#pragma once

#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

// Which host runs which rank. Pure functions, so the rules are unit-tested
// without spawning anything.
namespace troupe::elastic::launcher {

/// Bad host list, hostfile line, or rank count; the message says which.
class plan_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A host and how many ranks it may run.
struct host_spec {
  std::string name;
  int slots = 1;
};

/// The identity of one rank, as exported to its environment.
struct rank_slot {
  int rank = 0;
  std::string host;
  int host_index = 0; // position of the host among the hosts that run ranks
  int local_rank = 0;
  int local_size = 0;
  int cross_rank = 0;
  int cross_size = 0;
  /// Index among the ranks on the same machine: local_rank, unless several
  /// listed hosts are this machine (see number_local_ranks_on_this_machine).
  int machine_local_rank = 0;
};

/// Parses "-H" syntax: "host:slots,host:slots"; a host without ":slots"
/// has one slot.
std::vector<host_spec> parse_host_list(const std::string& text);

/// Parses a hostfile: one "host slots=N" or "host:N" (or bare "host") per
/// line, '#' starts a comment. `source` names the file in errors.
std::vector<host_spec> parse_hostfile(std::istream& in,
                                      const std::string& source);

/// Assigns `np` ranks host by host, filling each host's slots before moving
/// on (Horovod's rule). Throws plan_error when the slots do not suffice.
/// local_rank: index within the host; local_size: ranks on that host;
/// cross_rank: index of the host among hosts that have this local_rank;
/// cross_size: how many hosts have this local_rank.
std::vector<rank_slot> plan_ranks(const std::vector<host_spec>& hosts, int np);

/// Numbers `machine_local_rank` across every slot whose host is this machine
/// (`is_local_host`), in rank order, so ranks of two listed hosts that are
/// both this machine (`-H localhost:2,127.0.0.1:2`) get distinct per-machine
/// resources such as their metrics port.
void number_local_ranks_on_this_machine(std::vector<rank_slot>& ranks,
                                        const std::string& own_hostname);

/// True for names that mean this machine: localhost, 127.x.x.x, ::1, and
/// `own_hostname` (also its short form before the first dot).
bool is_local_host(const std::string& name, const std::string& own_hostname);

} // namespace troupe::elastic::launcher
