#pragma once

#include <cstdint>

#include "troupe/v1/control.pb.h"

namespace troupe::metrics {

/// Bytes that cross the slowest link per rank for one collective, as
/// nccl-tests defines bus bandwidth, so that busbw compares across ops and
/// sizes; n = `set_size`, the ranks of the collective's process set:
/// allreduce 2(n-1)/n x bytes; allgather and reducescatter (n-1)/n x the
/// total (gathered, or pre-scatter) bytes; alltoall (n-1)/n x bytes;
/// broadcast = bytes; barrier 0. `bytes` is that total.
uint64_t bus_bytes(v1::OpType op, uint64_t bytes, int set_size);

} // namespace troupe::metrics
