#include "request_checks.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "op_properties.hpp"
#include "troupe/types.hpp"

namespace troupe {

namespace {

bool floating(v1::DataType d) {
  return d == v1::DATA_TYPE_FLOAT16 || d == v1::DATA_TYPE_BFLOAT16 ||
         d == v1::DATA_TYPE_FLOAT32 || d == v1::DATA_TYPE_FLOAT64;
}

} // namespace

std::string check_request(const v1::Request& r) {
  const auto& name = r.tensor_name();
  if (name.empty())
    return "a collective needs a non-empty tensor name";
  const auto& op = properties(r.op());
  if (!op.executed && r.op() != v1::OP_TYPE_JOIN)
    return "tensor '" + name + "': unknown operation " + std::to_string(r.op());
  if (!v1::DataType_IsValid(r.dtype()))
    return "tensor '" + name + "': unknown dtype " + std::to_string(r.dtype());
  if (!v1::ReduceOp_IsValid(r.reduce_op()))
    return "tensor '" + name + "': unknown reduction " + std::to_string(r.reduce_op());
  // Sizes are computed in int64 bytes everywhere (num_elements, buffers):
  // a shape whose byte count overflows cannot be a real tensor.
  auto shape = [&] { return to_string(shape_t(r.shape().begin(), r.shape().end())); };
  int64_t bytes = static_cast<int64_t>(element_size(static_cast<data_type>(r.dtype())));
  for (auto d : r.shape()) {
    if (d < 0)
      return "tensor '" + name + "': negative dimension in shape " + shape();
    if (d > 0 && bytes > std::numeric_limits<int64_t>::max() / d)
      return "tensor '" + name + "': shape " + shape() + " does not fit in 2^63 bytes";
    bytes *= d;
  }
  if (r.group_size() < 0 || (r.group_size() > 1 && r.group_name().empty()))
    return "tensor '" + name + "': a group of " + std::to_string(r.group_size()) +
           " tensors needs a group name";
  // Deadlines are added to steady_clock's int64 nanoseconds: a wire value of
  // centuries would overflow (found by fuzz/control_messages_fuzzer).
  constexpr int64_t max_deadline_ms = int64_t{10} * 366 * 24 * 3600 * 1000;
  if (r.deadline_ms() > max_deadline_ms)
    return "tensor '" + name + "': deadline of " + std::to_string(r.deadline_ms()) +
           " ms is beyond 10 years";
  if (r.device_ordinal() < 0)
    return "tensor '" + name + "': negative device ordinal " + std::to_string(r.device_ordinal());
  // Built only for an error: a request that passes allocates nothing.
  auto where = [&] { return std::string(op.label) + " of '" + name + "': "; };
  const bool scalar = r.shape_size() == 0;
  if (r.op() == v1::OP_TYPE_REDUCESCATTER) {
    if (r.reduce_op() != v1::REDUCE_OP_SUM && r.reduce_op() != v1::REDUCE_OP_AVERAGE)
      return where() + "Reducescatter currently only supports AVERAGE and SUM.";
    if (scalar)
      return where() + "Reducescatter does not support scalar inputs";
  }
  if (op.reduces) {
    if (r.reduce_op() == v1::REDUCE_OP_ADASUM && !floating(r.dtype()))
      return where() + "Adasum supports floating-point tensors, not " +
             to_string(static_cast<data_type>(r.dtype()));
    if (r.dtype() == v1::DATA_TYPE_BOOL &&
        (r.reduce_op() == v1::REDUCE_OP_AVERAGE || r.prescale_factor() != 1.0 ||
         r.postscale_factor() != 1.0))
      return "tensor '" + name + "': bool supports sum, min, max and product without "
             "prescale/postscale factors";
  }
  if (op.gathers && scalar)
    return where() + (r.op() == v1::OP_TYPE_ALLGATHER
                      ? "a scalar cannot be gathered; give the tensor at least one dimension"
                      : "a scalar cannot be exchanged; give the tensor at least one dimension");
  return {};
}

std::string check_response(const v1::Response& r, int32_t set_size) {
  const auto names = static_cast<int64_t>(r.tensor_names_size());
  // Built only for an error: every list's responses pass here.
  const auto what = [&] {
    return std::string(properties(r.op()).name) + " response" +
           (names > 0 ? " for '" + r.tensor_names(0) + "'" + (names > 1 ? " and others" : "")
                      : "");
  };
  if (names == 0)
    return what() + " names no tensor";
  for (const auto& name : r.tensor_names())
    if (name.empty())
      return what() + " names a tensor without a name";
  if (r.op() == v1::OP_TYPE_ERROR)
    return r.error().code() == 0 ? what() + " has no error code" : "";
  const auto counted = [&](const char* field, int64_t have, int64_t want) {
    return have == want ? std::string()
                        : what() + " has " + std::to_string(have) + " " + field + " for " +
                            std::to_string(names) + " tensor(s), not " + std::to_string(want);
  };
  std::string err;
  if (r.op() == v1::OP_TYPE_ALLREDUCE || r.op() == v1::OP_TYPE_REDUCESCATTER)
    err = counted("tensor_sizes", r.tensor_sizes_size(), names);
  if (r.op() == v1::OP_TYPE_ALLGATHER) {
    err = counted("tensor_sizes", r.tensor_sizes_size(), names * set_size);
    if (err.empty())
      err = counted("row_elements", r.row_elements_size(), names);
  }
  const auto out_of_range = [](const auto& values) {
    constexpr int64_t most = int64_t{1} << 48;
    return std::any_of(values.begin(), values.end(),
                       [](int64_t v) { return v < 0 || v > most; });
  };
  if (err.empty() && (out_of_range(r.tensor_sizes()) || out_of_range(r.row_elements())))
    err = what() + " has a size below 0 or above 2^48 elements";
  return err;
}

} // namespace troupe
