#include "metrics/collective_metrics.hpp"

#include <prometheus/family.h>
#include <prometheus/registry.h>

#include "actors/tensor_entry.hpp"
#include "metrics/bus_bytes.hpp"
#include "metrics/set_series.hpp"
#include "proto/op_properties.hpp"
#include "troupe/status.hpp"

namespace troupe::metrics {

namespace {

const char* status_labels[] = {"ok", "error"};

} // namespace

std::vector<double> exponential_buckets(double start, double factor, int count) {
  std::vector<double> out;
  for (double b = start; static_cast<int>(out.size()) < count; b *= factor)
    out.push_back(b);
  return out;
}

std::vector<double> latency_buckets() {
  return exponential_buckets(1e-5, 2, 25);
}

collective_families::collective_families(prometheus::Registry& reg)
  : operations(prometheus::BuildCounter()
                 .Name("troupe_collective_operations_total")
                 .Help("Collectives executed by the backend (a fused batch is one).")
                 .Register(reg)),
    tensors(prometheus::BuildCounter()
              .Name("troupe_collective_tensors_total")
              .Help("Tensors in the collectives executed by the backend.")
              .Register(reg)),
    bytes(prometheus::BuildCounter()
            .Name("troupe_collective_bytes_total")
            .Help("Payload bytes of executed collectives on this rank (allgather: the "
                  "gathered result; others: the input).")
            .Register(reg)),
    bus_bytes(prometheus::BuildCounter()
                .Name("troupe_collective_bus_bytes_total")
                .Help("Bus bytes as nccl-tests counts them (allreduce 2(n-1)/n, allgather, "
                      "reducescatter and alltoall (n-1)/n, broadcast 1 times the payload); "
                      "rate() gives bus bandwidth.")
                .Register(reg)),
    errors(prometheus::BuildCounter()
             .Name("troupe_backend_errors_total")
             .Help("Collectives the backend failed, by status code.")
             .Register(reg)),
    duration(prometheus::BuildHistogram()
               .Name("troupe_collective_duration_seconds")
               .Help("Time the backend spent executing one collective.")
               .Register(reg)),
    size(prometheus::BuildHistogram()
           .Name("troupe_collective_message_size_bytes")
           .Help("Payload bytes of one executed collective.")
           .Register(reg)),
    fusion_bytes(prometheus::BuildHistogram()
                   .Name("troupe_fusion_batch_bytes")
                   .Help("Bytes of one allreduce batch (fused or not).")
                   .Register(reg)),
    fusion_tensors(prometheus::BuildHistogram()
                     .Name("troupe_fusion_batch_tensors")
                     .Help("Tensors in one allreduce batch (1 = not fused).")
                     .Register(reg)) {
}

collective_metrics::collective_metrics(const collective_families& f, set_series& series,
                                       int set_size, const std::string& backend,
                                       prometheus::Gauge& mailbox)
  : set_size_(set_size),
    backend_errors_(series.add(f.errors, {{"backend", backend}, {"code", "backend"}})),
    internal_errors_(series.add(f.errors, {{"backend", backend}, {"code", "internal"}})),
    fusion_bytes_(series.add(f.fusion_bytes, {}, exponential_buckets(64, 4, 12))),
    fusion_tensors_(series.add(f.fusion_tensors, {}, exponential_buckets(1, 2, 11))),
    mailbox_(mailbox) {
  static_assert(op_count == v1::OpType_ARRAYSIZE, "one slot per troupe.v1.OpType value");
  for (int i = 0; i < v1::OpType_ARRAYSIZE; ++i) {
    const auto op = static_cast<v1::OpType>(i);
    if (!properties(op).executed)
      continue;  // join and errors never reach a backend
    auto& o = ops_[static_cast<size_t>(op)];
    const std::string label = properties(op).label;
    for (size_t s = 0; s < o.status.size(); ++s) {
      const prometheus::Labels labels{
        {"op", label}, {"backend", backend}, {"status", status_labels[s]}};
      o.status[s] = {&series.add(f.operations, labels), &series.add(f.tensors, labels),
                     &series.add(f.bytes, labels), &series.add(f.bus_bytes, labels)};
    }
    o.duration = &series.add(f.duration, {{"op", label}}, latency_buckets());
    o.size = &series.add(f.size, {{"op", label}}, exponential_buckets(64, 4, 14));
  }
}

void collective_metrics::executed(const actors::collective_work& work, const status& result,
                                  uint64_t bytes, double seconds, size_t queued) {
  mailbox_.Set(static_cast<double>(queued));
  const auto op = work.response.op();
  if (op < 0 || static_cast<size_t>(op) >= ops_.size() || !ops_[static_cast<size_t>(op)].size)
    return;
  auto& o = ops_[static_cast<size_t>(op)];
  const auto& s = o.status[result.ok() ? 0 : 1];
  s.operations->Increment();
  s.tensors->Increment(static_cast<double>(work.entries.size()));
  s.bytes->Increment(static_cast<double>(bytes));
  s.bus_bytes->Increment(static_cast<double>(metrics::bus_bytes(op, bytes, set_size_)));
  o.duration->Observe(seconds);
  o.size->Observe(static_cast<double>(bytes));
  if (op == v1::OP_TYPE_ALLREDUCE) {
    fusion_bytes_.Observe(static_cast<double>(bytes));
    fusion_tensors_.Observe(static_cast<double>(work.entries.size()));
  }
  if (result.code() == status_code::backend)
    backend_errors_.Increment();
  else if (!result.ok())
    internal_errors_.Increment();
}

} // namespace troupe::metrics
