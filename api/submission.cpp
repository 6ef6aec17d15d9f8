#include "api/submission.hpp"

#include "backends/registry.hpp"

namespace troupe::api {

namespace {

prepared invalid(std::string message) {
  return {std::nullopt, {status_code::invalid_argument, std::move(message)}};
}

prepared ok(submission sub) {
  return {std::move(sub), {}};
}

std::string check_tensor(const tensor& t, const std::string& name) {
  if (name.empty())
    return "a collective needs a non-empty tensor name";
  if (element_size(t.dtype) == 0)
    return "tensor '" + name + "': unknown dtype " + std::to_string(static_cast<int>(t.dtype));
  for (auto d : t.shape)
    if (d < 0)
      return "tensor '" + name + "': negative dimension in shape " + to_string(t.shape);
  if (t.data == nullptr && num_elements(t.shape) > 0)
    return "tensor '" + name + "': null data pointer for a non-empty tensor";
  if (t.device.ordinal < 0)
    return "tensor '" + name + "': negative device ordinal " + std::to_string(t.device.ordinal);
  if (auto missing = backends::missing_backend(t.device.kind); !missing.empty())
    return "tensor '" + name + "' is on " + to_string(t.device) + ", but " + missing;
  return {};
}

std::string check_reduction(const tensor& t, const std::string& name, reduce_op op,
                            double prescale, double postscale) {
  if (op == reduce_op::adasum && t.dtype != data_type::float16 &&
      t.dtype != data_type::bfloat16 && t.dtype != data_type::float32 &&
      t.dtype != data_type::float64)
    return "allreduce of '" + name + "': Adasum supports floating-point tensors, not " +
           to_string(t.dtype);
  if (t.dtype == data_type::boolean &&
      (op == reduce_op::average || prescale != 1.0 || postscale != 1.0))
    return "tensor '" + name + "': bool supports sum, min, max and product without "
           "prescale/postscale factors";
  return {};
}

} // namespace

prepared prepare_allreduce(const tensor& input, const tensor& output, const std::string& name,
                           reduce_op op, double prescale, double postscale, int set_size) {
  if (auto err = check_tensor(input, name); !err.empty())
    return invalid(err);
  if (auto err = check_reduction(input, name, op, prescale, postscale); !err.empty())
    return invalid(err);
  if (op == reduce_op::adasum && (set_size & (set_size - 1)) != 0)
    return invalid("allreduce of '" + name + "': Adasum needs a power-of-two number of ranks, "
                   "not " + std::to_string(set_size));
  if (output.dtype != input.dtype || output.shape != input.shape)
    return invalid("allreduce of '" + name + "': output " + to_string(output.dtype) +
                   to_string(output.shape) + " differs from input " + to_string(input.dtype) +
                   to_string(input.shape));
  if (output.data == nullptr && num_elements(output.shape) > 0)
    return invalid("allreduce of '" + name + "': null output pointer");
  if (!output.device.same_memory(input.device))
    return invalid("allreduce of '" + name + "': output on " + to_string(output.device) +
                   ", input on " + to_string(input.device) + "; both must be on one device");
  return ok({v1::OP_TYPE_ALLREDUCE, input, output, name, op, 0, prescale, postscale, {}, {}});
}

prepared prepare_reducescatter(const tensor& input, const std::string& name, reduce_op op,
                               double prescale, double postscale,
                               const output_allocator& allocate) {
  if (auto err = check_tensor(input, name); !err.empty())
    return invalid(err);
  if (op != reduce_op::sum && op != reduce_op::average)
    return invalid("reducescatter of '" + name +
                   "': Reducescatter currently only supports AVERAGE and SUM.");
  if (auto err = check_reduction(input, name, op, prescale, postscale); !err.empty())
    return invalid(err);
  if (input.shape.empty())
    return invalid("reducescatter of '" + name +
                   "': Reducescatter does not support scalar inputs");
  return ok({v1::OP_TYPE_REDUCESCATTER, input, input, name, op, 0, prescale, postscale, {},
             allocate});
}

prepared prepare_allgather(const tensor& input, const std::string& name,
                           const output_allocator& allocate) {
  if (auto err = check_tensor(input, name); !err.empty())
    return invalid(err);
  if (input.shape.empty())
    return invalid("allgather of '" + name +
                   "': a scalar cannot be gathered; give the tensor at least one dimension");
  return ok(
    {v1::OP_TYPE_ALLGATHER, input, input, name, reduce_op::sum, 0, 1.0, 1.0, {}, allocate});
}

prepared prepare_alltoall(const tensor& input, const std::string& name,
                          const std::vector<int64_t>& splits, int set_size,
                          const output_allocator& allocate) {
  if (auto err = check_tensor(input, name); !err.empty())
    return invalid(err);
  const auto where = "alltoall of '" + name + "': ";
  if (input.shape.empty())
    return invalid(where + "a scalar cannot be exchanged; give the tensor at least one "
                           "dimension");
  const int64_t rows = input.shape[0];
  if (splits.empty()) {
    if (rows % set_size != 0)
      return invalid(where + "splits not provided, but first dimension of tensor is not an "
                             "even multiple of the number of workers.");
  } else {
    if (splits.size() != static_cast<size_t>(set_size))
      return invalid(where + "Number of entries in splits does not equal number of workers.");
    int64_t sum = 0;
    for (auto s : splits) {
      if (s < 0)
        return invalid(where + "splits must not be negative.");
      sum += s;
    }
    if (sum > rows)
      return invalid(where + "Sum of splits entries is greater than the first dimension of "
                             "tensor.");
  }
  return ok(
    {v1::OP_TYPE_ALLTOALL, input, input, name, reduce_op::sum, 0, 1.0, 1.0, splits, allocate});
}

prepared prepare_broadcast(const tensor& t, int root_rank, const std::string& name,
                           int set_size) {
  if (auto err = check_tensor(t, name); !err.empty())
    return invalid(err);
  if (root_rank < 0 || root_rank >= set_size)
    return invalid("broadcast of '" + name + "': root rank " + std::to_string(root_rank) +
                   " is outside [0, " + std::to_string(set_size) + ")");
  return ok({v1::OP_TYPE_BROADCAST, t, t, name, reduce_op::sum, root_rank, 1.0, 1.0, {}, {}});
}

prepared prepare_barrier() {
  const tensor none{nullptr, data_type::uint8, {0}};
  return ok(
    {v1::OP_TYPE_BARRIER, none, none, "barrier.noname", reduce_op::sum, 0, 1.0, 1.0, {}, {}});
}

prepared prepare_join() {
  const tensor none{nullptr, data_type::int32, {0}};
  return ok({v1::OP_TYPE_JOIN, none, none, "join.noname", reduce_op::sum, 0, 1.0, 1.0, {}, {}});
}

} // namespace troupe::api
