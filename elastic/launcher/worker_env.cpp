#include "elastic/launcher/worker_env.hpp"

#include "elastic/job_secret.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <unordered_map>

namespace troupe::elastic::launcher {

std::vector<std::pair<std::string, std::string>>
rank_variables(const rank_slot& slot, const job_env& job) {
  auto str = [](int v) { return std::to_string(v); };
  std::vector<std::pair<std::string, std::string>> vars{
    {"TROUPE_RANK", str(slot.rank)},
    {"TROUPE_SIZE", str(job.size)},
    {"TROUPE_LOCAL_RANK", str(slot.local_rank)},
    {"TROUPE_LOCAL_SIZE", str(slot.local_size)},
    {"TROUPE_CROSS_RANK", str(slot.cross_rank)},
    {"TROUPE_CROSS_SIZE", str(slot.cross_size)},
    {"TROUPE_HOSTNAME", slot.host},
    {"TROUPE_MACHINE_LOCAL_RANK", str(slot.machine_local_rank)},
    {"TROUPE_JOB_ID", job.job_id},
    {secret_fd_variable, str(job.secret_fd)},
    {"HOROVOD_RANK", str(slot.rank)},
    {"HOROVOD_SIZE", str(job.size)},
    {"HOROVOD_LOCAL_RANK", str(slot.local_rank)},
    {"HOROVOD_LOCAL_SIZE", str(slot.local_size)},
    {"HOROVOD_CROSS_RANK", str(slot.cross_rank)},
    {"HOROVOD_CROSS_SIZE", str(slot.cross_size)},
    {"HOROVOD_HOSTNAME", slot.host},
    {"RANK", str(slot.rank)},
    {"WORLD_SIZE", str(job.size)},
    {"LOCAL_RANK", str(slot.local_rank)},
    {"LOCAL_WORLD_SIZE", str(slot.local_size)},
    {"GROUP_RANK", str(slot.host_index)},
    // Python buffers stdout when it is a pipe; ranks' lines would then
    // arrive late and out of order with respect to stderr.
    {"PYTHONUNBUFFERED", "1"},
  };
  if (job.store.kind == store_endpoint::backend::etcd)
    vars.emplace_back("TROUPE_RENDEZVOUS", job.store.describe());
  else
    vars.insert(vars.end(), {{"TROUPE_STORE_ADDR", job.store.host},
                             {"TROUPE_STORE_PORT", str(job.store.port)}});
  vars.insert(vars.end(), job.knobs.begin(), job.knobs.end());
  if (job.nccl_host_id_per_rank)
    vars.push_back(nccl_host_id(job, slot.rank));
  return vars;
}

bool gives_nccl_host_ids(bool asked, const std::vector<std::string>& parent) {
  const std::string set = "NCCL_HOSTID=";
  return asked && std::none_of(parent.begin(), parent.end(), [&](const std::string& entry) {
           return entry.compare(0, set.size(), set) == 0;
         });
}

std::pair<std::string, std::string> nccl_host_id(const job_env& job, int64_t n) {
  return {"NCCL_HOSTID", job.job_id + "-" + std::to_string(n)};
}

std::vector<std::string>
merge_environment(const std::vector<std::string>& parent,
                  const std::vector<std::pair<std::string, std::string>>& vars) {
  std::unordered_map<std::string, std::string> overrides;
  for (const auto& [name, value] : vars)
    overrides[name] = value;
  std::vector<std::string> env;
  for (const auto& entry : parent) {
    auto name = entry.substr(0, entry.find('='));
    if (overrides.count(name) == 0)
      env.push_back(entry);
  }
  // Appended in `vars` order; a later duplicate in `vars` wins.
  for (const auto& [name, value] : vars) {
    if (overrides.count(name) > 0) {
      env.push_back(name + "=" + overrides[name]);
      overrides.erase(name);
    }
  }
  return env;
}

std::string random_job_id() {
  std::random_device rd;
  std::uniform_int_distribution<unsigned long long> dist;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", dist(rd));
  return buf;
}

} // namespace troupe::elastic::launcher
