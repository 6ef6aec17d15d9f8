#include "workers/identity.hpp"

#include <algorithm>
#include <limits>

#include "ipc/cpu_affinity.hpp"
#include "ipc/process_alive.hpp"

namespace troupe::workers {

namespace {

std::optional<std::string> lookup_either(const env_lookup& lookup,
                                         const std::string& suffix) {
  if (auto v = lookup(("TROUPE_" + suffix).c_str()))
    return v;
  return lookup(("HOROVOD_" + suffix).c_str());
}

// `text`, the value of variable `name`, as an integer from `min` to `max`.
int64_t parse_integer(const std::string& name, const std::string& text, int64_t min_value,
                      int64_t max_value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= min_value && v <= max_value)
      return v;
  } catch (const std::exception&) {
    // reported below
  }
  throw config_error(name + "='" + text + "' is not an integer >= " + std::to_string(min_value));
}

int read_int(const env_lookup& lookup, const std::string& suffix, int fallback,
             int min_value) {
  auto text = lookup_either(lookup, suffix);
  if (!text || text->empty())
    return fallback;
  return static_cast<int>(
    parse_integer("TROUPE_" + suffix, *text, min_value, std::numeric_limits<int>::max()));
}

} // namespace

identity identity_from_env(const env_lookup& lookup, const config& cfg) {
  identity id;
  id.size = read_int(lookup, "SIZE", 1, 1);
  id.rank = read_int(lookup, "RANK", 0, 0);
  if (id.rank >= id.size)
    throw config_error("TROUPE_RANK=" + std::to_string(id.rank) +
                       " is not below TROUPE_SIZE=" + std::to_string(id.size));
  id.local_rank = read_int(lookup, "LOCAL_RANK", id.rank, 0);
  id.local_size = read_int(lookup, "LOCAL_SIZE", id.size, 1);
  id.machine_local_rank = read_int(lookup, "MACHINE_LOCAL_RANK", id.local_rank, 0);
  id.cross_rank = read_int(lookup, "CROSS_RANK", 0, 0);
  id.cross_size = read_int(lookup, "CROSS_SIZE", 1, 1);
  if (auto host = lookup("TROUPE_HOSTNAME"); host && !host->empty())
    id.hostname = *host;
  if (auto job = lookup("TROUPE_JOB_ID"); job && !job->empty())
    id.job_id = *job;
  if (cfg.rendezvous) {
    id.store = *cfg.rendezvous;
  } else {
    if (auto addr = lookup("TROUPE_STORE_ADDR"))
      id.store.host = *addr;
    id.store.port = static_cast<uint16_t>(read_int(lookup, "STORE_PORT", 0, 0));
  }
  // Taken only while the process is bound to exactly that CPU: a
  // TROUPE_CPU inherited from an outer job, say, is not.
  id.process_cpus = ipc::usable_cpu_list();
  const int cpu = read_int(lookup, "CPU", -1, 0);
  id.own_core = cpu >= 0 && id.process_cpus == std::vector<int>{cpu};
  const int runtime_cpu = read_int(lookup, "RUNTIME_CPU", -1, 0);
  const auto& usable = id.process_cpus;
  if (!id.own_core && std::find(usable.begin(), usable.end(), runtime_cpu) != usable.end())
    id.runtime_cpu = runtime_cpu;
  // Set by troupe-run alone (no HOROVOD_ names); read only where its pid
  // means the same process here.
  if (const auto ns = lookup("TROUPE_LAUNCHER_NS");
      ns && !ns->empty() && *ns == ipc::pid_namespace()) {
    const auto positive = [&](const char* name, int64_t max_value) {
      return parse_integer(name, lookup(name).value_or(""), 1, max_value);
    };
    id.launcher_pid =
      static_cast<pid_t>(positive("TROUPE_LAUNCHER_PID", std::numeric_limits<pid_t>::max()));
    id.launcher_start = static_cast<uint64_t>(
      positive("TROUPE_LAUNCHER_START", std::numeric_limits<int64_t>::max()));
  }
  id.elastic = read_int(lookup, "ELASTIC", 0, 0) != 0;
  if (id.elastic) {
    id.worker_id = read_int(lookup, "WORKER_ID", -1, 0);
    if (id.worker_id < 0 || !id.has_store())
      throw config_error("TROUPE_ELASTIC=1 needs TROUPE_WORKER_ID and TROUPE_STORE_ADDR / "
                         "TROUPE_STORE_PORT (or TROUPE_RENDEZVOUS): start elastic jobs with "
                         "troupe-run --min-np or --host-discovery-script");
  }
  if (id.size > 1 && (id.store.host.empty() || !id.has_store()))
    throw config_error("TROUPE_SIZE=" + std::to_string(id.size) +
                       " but neither TROUPE_STORE_ADDR / TROUPE_STORE_PORT nor "
                       "TROUPE_RENDEZVOUS is set: "
                       "start multi-rank jobs with troupe-run");
  return id;
}

} // namespace troupe::workers
