#include "metrics/collective_metrics.hpp"

#include <cctype>

#include "actors/tensor_entry.hpp"
#include "metrics/bus_bytes.hpp"
#include "metrics/registry.hpp"
#include "metrics/rank_metrics.hpp"
#include "troupe/status.hpp"

namespace troupe::metrics {

namespace {

// The ops a backend executes (join and errors never reach it).
constexpr v1::OpType executed_ops[] = {v1::OP_TYPE_ALLREDUCE, v1::OP_TYPE_ALLGATHER,
                                       v1::OP_TYPE_BROADCAST, v1::OP_TYPE_ALLTOALL,
                                       v1::OP_TYPE_BARRIER,   v1::OP_TYPE_REDUCESCATTER};
const char* status_labels[] = {"ok", "error"};

std::string op_label(v1::OpType op) {
  auto name = v1::OpType_Name(op).substr(8);  // OP_TYPE_ALLREDUCE -> ALLREDUCE
  for (auto& ch : name)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

} // namespace

collective_families::collective_families(registry& reg)
  : operations(reg.add_counter("troupe_collective_operations_total",
                               "Collectives executed by the backend (a fused batch is one).",
                               {"op", "backend", "status"})),
    tensors(reg.add_counter("troupe_collective_tensors_total",
                            "Tensors in the collectives executed by the backend.",
                            {"op", "backend", "status"})),
    bytes(reg.add_counter("troupe_collective_bytes_total",
                          "Payload bytes of executed collectives on this rank (allgather: "
                          "the gathered result; others: the input).",
                          {"op", "backend", "status"})),
    bus_bytes(reg.add_counter("troupe_collective_bus_bytes_total",
                              "Bus bytes as nccl-tests counts them (allreduce 2(n-1)/n, "
                              "allgather, reducescatter and alltoall (n-1)/n, broadcast 1 "
                              "times the payload); rate() gives bus bandwidth.",
                              {"op", "backend", "status"})),
    errors(reg.add_counter("troupe_backend_errors_total",
                           "Collectives the backend failed, by status code.",
                           {"backend", "code"})),
    duration(reg.add_histogram("troupe_collective_duration_seconds",
                               "Time the backend spent executing one collective.", {"op"},
                               latency_buckets())),
    size(reg.add_histogram("troupe_collective_message_size_bytes",
                           "Payload bytes of one executed collective.", {"op"},
                           exponential_buckets(64, 4, 14))),
    fusion_bytes(reg.add_histogram("troupe_fusion_batch_bytes",
                                   "Bytes of one allreduce batch (fused or not).", {},
                                   exponential_buckets(64, 4, 12))
                   .with()),
    fusion_tensors(reg.add_histogram("troupe_fusion_batch_tensors",
                                     "Tensors in one allreduce batch (1 = not fused).", {},
                                     exponential_buckets(1, 2, 11))
                     .with()) {
}

collective_metrics::collective_metrics(std::shared_ptr<registry> keep_alive,
                                       collective_families& f, const std::string& backend,
                                       int world_size, gauge& mailbox)
  : keep_alive_(std::move(keep_alive)), world_size_(world_size),
    backend_errors_(f.errors.with({backend, "backend"})),
    internal_errors_(f.errors.with({backend, "internal"})), fusion_bytes_(f.fusion_bytes),
    fusion_tensors_(f.fusion_tensors), mailbox_(mailbox) {
  for (auto op : executed_ops) {
    auto& o = ops_[static_cast<size_t>(op)];
    const auto label = op_label(op);
    for (size_t s = 0; s < o.status.size(); ++s) {
      const std::vector<std::string> values{label, backend, status_labels[s]};
      o.status[s] = {&f.operations.with(values), &f.tensors.with(values), &f.bytes.with(values),
                     &f.bus_bytes.with(values)};
    }
    o.duration = &f.duration.with({label});
    o.size = &f.size.with({label});
  }
}

void collective_metrics::executed(const actors::collective_work& work, const status& result,
                                  double seconds, size_t queued) {
  mailbox_.set(static_cast<int64_t>(queued));
  const auto op = work.response.op();
  if (op < 0 || static_cast<size_t>(op) >= ops_.size() || !ops_[static_cast<size_t>(op)].size)
    return;
  auto& o = ops_[static_cast<size_t>(op)];
  const uint64_t bytes = payload_bytes(work);
  const auto& s = o.status[result.ok() ? 0 : 1];
  s.operations->inc();
  s.tensors->inc(work.entries.size());
  s.bytes->inc(bytes);
  s.bus_bytes->inc(metrics::bus_bytes(op, bytes, world_size_));
  o.duration->observe(seconds);
  o.size->observe(static_cast<double>(bytes));
  if (op == v1::OP_TYPE_ALLREDUCE) {
    fusion_bytes_.observe(static_cast<double>(bytes));
    fusion_tensors_.observe(static_cast<double>(work.entries.size()));
  }
  if (result.code() == status_code::backend)
    backend_errors_.inc();
  else if (!result.ok())
    internal_errors_.inc();
}

} // namespace troupe::metrics
