#pragma once

#include "elastic/launcher/host_plan.hpp"
#include "elastic/store_endpoint.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace troupe::elastic::launcher {

/// What every rank of one job shares.
struct job_env {
  int size = 0;
  /// The rendezvous store: troupe-run's (TROUPE_STORE_ADDR / _PORT) or
  /// etcd (TROUPE_RENDEZVOUS).
  store_endpoint store;
  std::string job_id;
  /// Inherited descriptor holding the job's secret (TROUPE_SECRET_FD).
  int secret_fd = -1;
  /// Knob variables chosen on the command line, e.g. TROUPE_LOG_LEVEL.
  std::vector<std::pair<std::string, std::string>> knobs;
  /// Each worker gets NCCL_HOSTID=<job id>-<n> (--nccl-host-id-per-rank):
  /// NCCL refuses two ranks of one host on one GPU, and takes ranks with
  /// distinct host ids for separate hosts.
  bool nccl_host_id_per_rank = false;
};

/// Whether troupe-run gives each worker its own NCCL_HOSTID: asked for, and
/// the user has not set one in `parent` ("NAME=value" entries), which every
/// worker then keeps.
bool gives_nccl_host_ids(bool asked, const std::vector<std::string>& parent);

/// NCCL_HOSTID=<job id>-<n> for the worker `n` names uniquely in the job:
/// its rank, in an elastic job its worker id (ranks are renumbered there,
/// while a worker keeps its host id for its life).
std::pair<std::string, std::string> nccl_host_id(const job_env& job, int64_t n);

/// The variables troupe-run adds for one rank: Troupe's own names, Horovod's
/// and torch.distributed's, so existing scripts find their identity; and
/// the rank's NCCL_HOSTID when the job gives them.
std::vector<std::pair<std::string, std::string>>
rank_variables(const rank_slot& slot, const job_env& job);

/// `parent` ("NAME=value" entries) followed by `vars`; a variable of `vars`
/// that `parent` also has takes the value from `vars`.
std::vector<std::string>
merge_environment(const std::vector<std::string>& parent,
                  const std::vector<std::pair<std::string, std::string>>& vars);

/// A fresh random job id: 16 hex digits.
std::string random_job_id();

} // namespace troupe::elastic::launcher
