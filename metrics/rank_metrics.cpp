#include "metrics/rank_metrics.hpp"

#include <prometheus/family.h>
#include <prometheus/registry.h>

#include "metrics/autotune_metrics.hpp"
#include "metrics/build_info.hpp"
#include "metrics/set_series.hpp"

namespace troupe::metrics {

namespace {

const char* actor_labels[] = {"supervisor", "negotiator", "coordinator", "backend"};

prometheus::Gauge& gauge(prometheus::Registry& reg, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(reg).Add({});
}

} // namespace

/// The families of one rank that process sets add children to.
struct rank_families {
  explicit rank_families(std::shared_ptr<prometheus::Registry> reg)
    : book(std::make_shared<set_series::book>(reg)), collectives(*reg), autotune(*reg),
      negotiation(prometheus::BuildHistogram()
                    .Name("troupe_negotiation_duration_seconds")
                    .Help("Time from submitting a tensor until the coordinator's response "
                          "for it arrived on this rank (Horovod's NEGOTIATE span).")
                    .Register(*reg)),
      cycles(prometheus::BuildCounter()
               .Name("troupe_cycles_total")
               .Help("Response lists (and agreed lists of the fast lane) fully executed on "
                     "this rank.")
               .Register(*reg)),
      queue_depth(prometheus::BuildGauge()
                    .Name("troupe_tensor_queue_depth")
                    .Help("Tensors submitted on this rank and not yet completed.")
                    .Register(*reg)),
      stalled(prometheus::BuildGauge()
                .Name("troupe_stalled_tensors")
                .Help("Tensors some ranks submitted and others have not, past the stall "
                      "warning time (coordinator rank only).")
                .Register(*reg)),
      stall_warnings(prometheus::BuildCounter()
                       .Name("troupe_stall_warnings_total")
                       .Help("Stall warnings logged by the stall inspector (coordinator "
                             "rank only).")
                       .Register(*reg)),
      cache_hits(prometheus::BuildCounter()
                   .Name("troupe_response_cache_hits_total")
                   .Help("Requests sent as a response cache id instead of in full.")
                   .Register(*reg)),
      cache_misses(prometheus::BuildCounter()
                     .Name("troupe_response_cache_misses_total")
                     .Help("Requests that missed the response cache and were sent in full.")
                     .Register(*reg)),
      fast_lane_agreed(prometheus::BuildCounter()
                         .Name("troupe_fast_lane_agreed_total")
                         .Help("Cached allreduces this rank ran as its set's members agreed "
                               "on them in the control channel, without the coordinator.")
                         .Register(*reg)),
      tree_hits(prometheus::BuildCounter()
                  .Name("troupe_control_tree_hits_total")
                  .Help("Cache hits this rank sent up as an inner node of the process set's "
                        "control tree: how=\"aggregated\" counts one per subtree-wide hit "
                        "(every rank of its subtree named the tensor), how=\"passed\" one per "
                        "hit or range sent up as it came (a miss, the hold, a join).")
                  .Register(*reg)),
      tree_requests(prometheus::BuildCounter()
                      .Name("troupe_control_tree_requests_total")
                      .Help("Full requests this rank sent up as an inner node of the process "
                            "set's control tree: how=\"merged\" counts one per subtree-wide "
                            "request (every rank of its subtree sent the same), how=\"passed\" "
                            "one per request or range sent up as it came (members differed, "
                            "some named the tensor by cache id, the hold, a join).")
                      .Register(*reg)),
      tree_hold_expired(prometheus::BuildCounter()
                          .Name("troupe_control_tree_hold_expired_total")
                          .Help("Rounds of a tensor this rank, as an inner node of the process "
                                "set's control tree, held for the whole hold and then sent up as "
                                "they came, because ranks of its subtree had not asked for it "
                                "by then (a rank that late, or whose request went another "
                                "way): what=\"hits\" or \"requests\".")
                          .Register(*reg)),
      mailbox(prometheus::BuildGauge()
                .Name("troupe_actor_mailbox_depth")
                .Help("Messages waiting in an actor's mailbox, sampled when it handles a "
                      "message.")
                .Register(*reg)) {
  }

  std::shared_ptr<set_series::book> book;
  collective_families collectives;
  autotune_families autotune;
  prometheus::Family<prometheus::Histogram>& negotiation;
  prometheus::Family<prometheus::Counter>& cycles;
  prometheus::Family<prometheus::Gauge>& queue_depth;
  prometheus::Family<prometheus::Gauge>& stalled;
  prometheus::Family<prometheus::Counter>& stall_warnings;
  prometheus::Family<prometheus::Counter>& cache_hits;
  prometheus::Family<prometheus::Counter>& cache_misses;
  prometheus::Family<prometheus::Counter>& fast_lane_agreed;
  prometheus::Family<prometheus::Counter>& tree_hits;
  prometheus::Family<prometheus::Counter>& tree_requests;
  prometheus::Family<prometheus::Counter>& tree_hold_expired;
  prometheus::Family<prometheus::Gauge>& mailbox;
};

set_metrics::set_metrics(const rank_families& f, uint32_t set_id, int set_size,
                         const std::string& backend)
  : series_(std::make_unique<set_series>(f.book, set_id)),
    negotiation_seconds_(series_->add(f.negotiation, {}, latency_buckets())),
    cycles_(series_->add(f.cycles, {})), queue_depth_(series_->add(f.queue_depth, {})),
    stalled_(series_->add(f.stalled, {})), stall_warnings_(series_->add(f.stall_warnings, {})),
    cache_hits_(series_->add(f.cache_hits, {})),
    cache_misses_(series_->add(f.cache_misses, {})),
    fast_lane_agreed_(series_->add(f.fast_lane_agreed, {})),
    tree_aggregated_(series_->add(f.tree_hits, {{"how", "aggregated"}})),
    tree_passed_(series_->add(f.tree_hits, {{"how", "passed"}})),
    tree_requests_merged_(series_->add(f.tree_requests, {{"how", "merged"}})),
    tree_requests_passed_(series_->add(f.tree_requests, {{"how", "passed"}})),
    tree_hits_expired_(series_->add(f.tree_hold_expired, {{"what", "hits"}})),
    tree_requests_expired_(series_->add(f.tree_hold_expired, {{"what", "requests"}})),
    collectives_(f.collectives, *series_, set_size, backend,
                 series_->add(f.mailbox, {{"actor", "backend"}})) {
  for (auto who : {actor_kind::negotiator, actor_kind::coordinator})
    mailbox_[static_cast<size_t>(who)] =
      &series_->add(f.mailbox, {{"actor", actor_labels[static_cast<size_t>(who)]}});
}

set_metrics::~set_metrics() = default;

rank_metrics::rank_metrics(const rank_position& pos, const std::string& built_backends)
  : registry_(std::make_shared<prometheus::Registry>()),
    families_(std::make_unique<rank_families>(registry_)),
    supervisor_mailbox_(families_->mailbox.Add({{"actor", "supervisor"}})),
    rank_(gauge(*registry_, "troupe_rank", "This process' rank in the job.")),
    world_size_(gauge(*registry_, "troupe_world_size", "Ranks in the job.")),
    local_rank_(gauge(*registry_, "troupe_local_rank", "This process' rank on its host.")),
    epoch_(gauge(*registry_, "troupe_membership_epoch",
                 "Membership epoch this process serves in: 0 after init (in an elastic job, "
                 "the epoch of troupe-run's plan it joined), the next one after each reset.")),
    control_links_(gauge(*registry_, "troupe_control_links",
                         "Ranks this one holds a control connection to in its membership epoch: "
                         "every other in a full mesh, its parent and children along the control "
                         "tree.")),
    resets_(*registry_) {
  register_build_info(*registry_, built_backends);
  position(pos, 0);
}

void rank_metrics::position(const rank_position& pos, int64_t epoch) {
  rank_.Set(pos.rank);
  world_size_.Set(pos.size);
  local_rank_.Set(pos.local_rank);
  epoch_.Set(static_cast<double>(epoch));
}

rank_metrics::~rank_metrics() = default;

std::shared_ptr<set_metrics> rank_metrics::for_set(uint32_t set_id, int set_size,
                                                   const std::string& backend) {
  return std::make_shared<set_metrics>(*families_, set_id, set_size, backend);
}

std::shared_ptr<autotune_metrics> rank_metrics::for_autotune(uint32_t set_id) {
  return std::make_shared<autotune_metrics>(families_->autotune,
                                            std::make_unique<set_series>(families_->book, set_id));
}

} // namespace troupe::metrics
