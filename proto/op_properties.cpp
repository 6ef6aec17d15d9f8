#include "op_properties.hpp"

namespace troupe {

namespace {

// clang-format off
constexpr op_properties rows[] = {
  // name,          label,           executed, cacheable, reduces, same_shape, gathers, join
  {"ALLREDUCE",     "allreduce",     true,     true,      true,    true,       false,   nullptr},
  {"ALLGATHER",     "allgather",     true,     true,      false,   false,      true,
   "Allgather is not supported with Join at this time. Specify sparse_to_dense=True if using "
   "DistributedOptimizer"},
  {"BROADCAST",     "broadcast",     true,     true,      false,   true,       false,
   "Broadcast is not supported with Join at this time."},
  {"JOIN",          "join",          false,    false,     false,   false,      false,   nullptr},
  {"UNKNOWN",       "unknown",       false,    false,     false,   false,      false,   nullptr},
  {"ALLTOALL",      "alltoall",      true,     true,      false,   false,      true,
   "Alltoall is not supported with Join at this time."},
  {"BARRIER",       "barrier",       true,     false,     false,   false,      false,
   "Barrier is not supported with Join at this time."},
  {"REDUCESCATTER", "reducescatter", true,     true,      true,    true,       false,
   "Reducescatter is not supported with Join at this time."},
  {"ERROR",         "error",         false,    false,     false,   false,      false,   nullptr},
};
// clang-format on

static_assert(sizeof rows / sizeof rows[0] == v1::OpType_ARRAYSIZE,
              "one row per troupe.v1.OpType value");

constexpr int unknown_row = 4;  // the number control.proto reserves

} // namespace

const op_properties& properties(v1::OpType op) {
  const auto i = static_cast<int>(op);
  return i >= 0 && i < v1::OpType_ARRAYSIZE ? rows[i] : rows[unknown_row];
}

} // namespace troupe
