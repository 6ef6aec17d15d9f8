#include "workers/process_set_group.hpp"

#include <algorithm>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/negotiator.hpp"
#include "autotune/autotune_log.hpp"
#include "backends/backend_actor.hpp"
#include "backends/registry.hpp"
#include "backends/thread_affinity.hpp"
#include "control/control_tree.hpp"
#include "control/shm_channel.hpp"
#include "coordinator/coordinator_actor.hpp"
#include "metrics/autotune_metrics.hpp"
#include "metrics/rank_metrics.hpp"

namespace troupe::workers {

std::vector<caf::actor> process_set_group::children() const {
  std::vector<caf::actor> all{caf::actor_cast<caf::actor>(negotiator)};
  if (coordinator)
    all.push_back(caf::actor_cast<caf::actor>(coordinator));
  for (const auto& [kind, backend] : backends) {
    auto actor = caf::actor_cast<caf::actor>(backend.actor);
    // Staged CUDA tensors share the CPU backend's actor: listed once.
    if (std::find(all.begin(), all.end(), actor) == all.end())
      all.push_back(std::move(actor));
  }
  return all;
}

bool process_set_group::owns(const caf::actor_addr& who) const {
  const auto all = children();
  return std::any_of(all.begin(), all.end(),
                     [&](const caf::actor& a) { return a.address() == who; });
}

namespace {

// Ids past this many (a cache configured larger) go to the coordinator as
// before: 512 KiB of board per set at most.
constexpr size_t max_arrival_words = size_t{1} << 16;

// The tuner of the set whose coordinator runs here, or none: autotuning is
// off, or every setting it could change was set explicitly.
std::optional<coordinator::tuner_options> tuner_for(const group_spec& spec) {
  const auto& cfg = *spec.cfg;
  if (!cfg.autotune)
    return std::nullopt;
  coordinator::tuner_options t;
  auto& search = t.search;
  search.initial = {cfg.fusion_threshold, cfg.cycle_time_ms, cfg.cache_capacity > 0,
                    cfg.fusion_chunk_bytes};
  search.tune_fusion = !cfg.is_explicit("TROUPE_FUSION_THRESHOLD");
  search.tune_cycle = !cfg.is_explicit("TROUPE_CYCLE_TIME");
  search.tune_cache = !cfg.is_explicit("TROUPE_CACHE_CAPACITY");
  search.tune_chunk = !cfg.is_explicit("TROUPE_FUSION_CHUNK_BYTES");
  if (!search.tune_fusion && !search.tune_cycle && !search.tune_cache && !search.tune_chunk)
    return std::nullopt;
  search.warmup_samples = cfg.autotune_warmup_samples;
  search.max_samples = cfg.autotune_bayes_opt_max_samples;
  search.noise = cfg.autotune_gaussian_process_noise;
  search.seed = spec.set_id;
  t.set_id = spec.set_id;
  t.steps_per_sample = cfg.autotune_steps_per_sample;
  // "Cache on" when it was configured off: the default capacity (Horovod's).
  t.cache_capacity = cfg.cache_capacity > 0 ? cfg.cache_capacity : config{}.cache_capacity;
  if (!cfg.autotune_log.empty())
    t.log_path = autotune::log_path(cfg.autotune_log, spec.set_id, spec.epoch);
  t.metrics = spec.metrics->for_autotune(spec.set_id);
  t.timeline = spec.timeline;
  return t;
}

// The core this rank's backend threads pin themselves to
// (TROUPE_THREAD_AFFINITY, indexed by the rank's place on its machine), if
// any; a list too short for this rank is said once, with the global set.
std::optional<int> backend_core(const group_spec& spec) {
  const auto& cores = spec.cfg->thread_affinity;
  const auto at = static_cast<size_t>(spec.id->machine_local_rank);
  if (at < cores.size())
    return cores[at];
  if (!cores.empty() && spec.set_id == 0)
    spdlog::error("TROUPE_THREAD_AFFINITY lists {} core(s), none for rank {} (index {} on its "
                  "machine): its backend threads run unpinned",
                  cores.size(), spec.id->rank, at);
  return std::nullopt;
}

} // namespace

process_set_group spawn_group(caf::actor_system& sys, const group_spec& spec) {
  const auto& cfg = *spec.cfg;
  const auto& id = *spec.id;
  const auto mine = std::find(spec.members.begin(), spec.members.end(), id.rank);
  const int set_rank = static_cast<int>(mine - spec.members.begin());
  const int set_size = static_cast<int>(spec.members.size());
  backends::backend_context ctx;
  ctx.rank = set_rank;
  ctx.size = set_size;
  if (spec.set_id != 0)
    ctx.world_ranks = spec.members;
  ctx.communicator_tag = static_cast<int>(spec.set_id);
  ctx.advertise_host = id.listen_host;
  ctx.host = id.hostname;
  ctx.shared_memory = cfg.shared_memory;
  ctx.own_core = id.own_core;
  ctx.host_ranks = id.local_size;
  ctx.store = spec.store;
  ctx.store_prefix = id.job_id + "/set" + std::to_string(spec.set_id) + "." +
                     std::to_string(spec.serial) + "/";
  ctx.timeout =
    std::chrono::milliseconds(static_cast<int64_t>(cfg.gloo_timeout_seconds * 1000));
  ctx.fusion_chunk_bytes = cfg.fusion_chunk_bytes;
  ctx.mpi_sendrecv_chunk_bytes = cfg.adasum_mpi_chunk_size;
  ctx.hierarchical_allreduce = cfg.hierarchical_allreduce;
  ctx.hierarchical_allgather = cfg.hierarchical_allgather;
  auto made = backends::make_set_backends(ctx, {cfg.cpu_operations, cfg.gpu_operations});
  process_set_group g;
  g.members = spec.members;
  g.serial = spec.serial;
  auto counted = spec.metrics->for_set(spec.set_id, set_size, made.cpu->name());
  // A backend actor sees only its part, which keeps the whole set's alive.
  // Bound to its CPU: the backend answers before it completes handles, and
  // the control-channel reader polls for an awaited reply (below).
  const bool bound = backends::rank_bound(id.runtime_on_one_cpu());
  backends::backend_actor_options backend_options;
  backend_options.core = backend_core(spec);
  backend_options.rank_bound = bound;
  if (id.runtime_cpu >= 0)
    backend_options.cpus = id.process_cpus;
  const auto spawn = [&](std::unique_ptr<backends::backend> impl,
                         const std::shared_ptr<metrics::set_metrics>& m) {
    return backends::spawn_backend_actor(
      sys, std::move(impl), std::shared_ptr<metrics::collective_metrics>(m, &m->collectives()),
      backend_options);
  };
  g.backends[device_kind::cpu] = spawn(std::move(made.cpu), counted);
  if (made.gpu) {
    auto gpu_counted = spec.metrics->for_set(spec.set_id, set_size, made.gpu->name());
    g.backends[device_kind::cuda] = spawn(std::move(made.gpu), gpu_counted);
  } else if (made.gpu_on_cpu) {
    g.backends[device_kind::cuda] = g.backends[device_kind::cpu];
  }
  // Coordinator and negotiator exist before the backend is connected: the
  // backend runs queued work only after (connect), and once the
  // coordinator's rank has connected, every member's group exists.
  if (set_rank == 0) {
    coordinator::coordinator_options options;
    options.stall = {cfg.stall_check, cfg.stall_check_seconds, cfg.stall_shutdown_seconds};
    options.fusion_threshold = cfg.fusion_threshold;
    options.disable_group_fusion = cfg.disable_group_fusion;
    options.cache_capacity = static_cast<size_t>(cfg.cache_capacity);
    options.cycle_time =
      std::chrono::microseconds(static_cast<int64_t>(cfg.cycle_time_ms * 1000));
    options.epoch = spec.epoch;
    options.tree_fanout = cfg.control_fanout;
    options.autotune = tuner_for(spec);
    if (cfg.shm_control && set_size > 1) {
      try {
        // One arrival word per cache id, for sets whose masks hold every
        // member (the fast lane; docs/architecture.md).
        control::channel_sizes sizes;
        if (cfg.fast_lane && set_size <= control::arrival_board::max_members)
          sizes.arrival_words = std::min<size_t>(options.cache_capacity, max_arrival_words);
        options.control = std::make_shared<control::channel_host>(set_size, sizes);
        g.control_channel = options.control->name();
      } catch (const std::exception& e) {
        spdlog::warn("process set {}: no shared-memory control channel ({}); its members "
                     "send their lists over the network",
                     spec.set_id, e.what());
      }
    }
    g.coordinator = coordinator::spawn_coordinator(sys, spec.set_id, set_size, options, counted);
  }
  const bool tracing = !cfg.timeline.empty() && cfg.timeline != dynamic_timeline;
  actors::negotiator_args args{spec.set_id, set_rank, counted, tracing, spec.epoch,
                               // A quarter of the stall check time, 1 s at most.
                               std::chrono::milliseconds(static_cast<int64_t>(
                                 std::min(1000.0, cfg.stall_check_seconds * 250))),
                               spec.id->hostname};
  args.await_place = set_rank != 0 && control::tree_possible(set_size, cfg.control_fanout);
  args.set_size = set_size;
  args.mark_cycles = cfg.timeline_mark_cycles;
  // Only bound: an unbound rank's polling reader shares CPUs with the
  // threads it waits for (2 ranks on 2 CPUs, unbound, a 4-byte allreduce:
  // 78 -> 96 us under MPI; bound 45 -> 40 us, docs/benchmarks.md run (18)).
  if (bound)
    args.channel_poll = backends::peer_poll_time;
  args.runs_small_works = spec.set_id == 0;
  g.inbox = args.inbox = std::make_shared<actors::submission_inbox>();
  args.application = spec.application;
  g.negotiator = actors::spawn_negotiator(sys, std::move(args), g.coordinator, g.backends,
                                          spec.timeline);
  return g;
}

} // namespace troupe::workers
