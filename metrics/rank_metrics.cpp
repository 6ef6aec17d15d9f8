#include "metrics/rank_metrics.hpp"

#include "metrics/build_info.hpp"
#include "metrics/collective_metrics.hpp"
#include "metrics/registry.hpp"

namespace troupe::metrics {

namespace {

const char* actor_labels[] = {"supervisor", "negotiator", "coordinator", "backend"};

// Build and position come first in the exposition: they say who answers.
std::shared_ptr<registry> introduce(std::shared_ptr<registry> reg, const rank_position& pos,
                                    const std::string& built_backends) {
  register_build_info(*reg, built_backends);
  reg->add_gauge("troupe_rank", "This process' rank in the job.").with().set(pos.rank);
  reg->add_gauge("troupe_world_size", "Ranks in the job.").with().set(pos.size);
  reg->add_gauge("troupe_local_rank", "This process' rank on its host.")
    .with()
    .set(pos.local_rank);
  return reg;
}

} // namespace

std::vector<double> latency_buckets() {
  return exponential_buckets(1e-5, 2, 25);
}

rank_metrics::rank_metrics(std::shared_ptr<registry> reg, const rank_position& pos,
                           const std::string& built_backends)
  : reg_(introduce(std::move(reg), pos, built_backends)),
    world_size_(pos.size), collectives_(std::make_unique<collective_families>(*reg_)),
    negotiation_seconds_(
      reg_->add_histogram("troupe_negotiation_duration_seconds",
                          "Time from submitting a tensor until the coordinator's response "
                          "for it arrived on this rank (Horovod's NEGOTIATE span).",
                          {}, latency_buckets())
        .with()),
    cycles_(reg_->add_counter("troupe_cycles_total",
                              "Response lists fully executed on this rank.")
              .with()),
    queue_depth_(reg_->add_gauge("troupe_tensor_queue_depth",
                                 "Tensors submitted on this rank and not yet completed.")
                   .with()),
    stalled_(reg_->add_gauge("troupe_stalled_tensors",
                             "Tensors some ranks submitted and others have not, past the "
                             "stall warning time (coordinator rank only).")
               .with()),
    stall_warnings_(reg_->add_counter("troupe_stall_warnings_total",
                                      "Stall warnings logged by the stall inspector "
                                      "(coordinator rank only).")
                      .with()),
    cache_hits_(reg_->add_counter("troupe_response_cache_hits_total",
                                  "Requests sent as a response cache id instead of in full.")
                  .with()),
    cache_misses_(reg_->add_counter("troupe_response_cache_misses_total",
                                    "Requests that missed the response cache and were sent "
                                    "in full.")
                    .with()) {
  auto& mailbox = reg_->add_gauge("troupe_actor_mailbox_depth",
                                  "Messages waiting in an actor's mailbox, sampled when it "
                                  "handles a message.",
                                  {"actor"});
  for (size_t i = 0; i < mailbox_.size(); ++i)
    mailbox_[i] = &mailbox.with({actor_labels[i]});
}

rank_metrics::~rank_metrics() = default;

std::shared_ptr<collective_metrics> rank_metrics::for_backend(const std::string& backend) {
  return std::make_shared<collective_metrics>(
    reg_, *collectives_, backend, world_size_,
    *mailbox_[static_cast<size_t>(actor_kind::backend)]);
}

} // namespace troupe::metrics
