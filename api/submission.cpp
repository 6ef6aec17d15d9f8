#include "api/submission.hpp"

#include "backends/registry.hpp"
#include "proto/op_properties.hpp"
#include "proto/request_checks.hpp"

namespace troupe::api {

namespace {

prepared invalid(std::string message) {
  return {nullptr, {status_code::invalid_argument, std::move(message)}};
}

prepared ok(actors::tensor_entry_ptr e) {
  return {std::move(e), {}};
}

// One collective on `input` as the coordinator will see it (the request)
// and this rank's memory.
actors::tensor_entry_ptr describe(v1::OpType op, const tensor& input, const tensor& output,
                                  const std::string& name, reduce_op rop, int root,
                                  double prescale, double postscale,
                                  std::vector<int64_t> splits, output_allocator allocate) {
  auto e = std::make_shared<actors::tensor_entry>();
  e->input = input;
  e->output = output;
  e->splits = std::move(splits);
  e->allocate = std::move(allocate);
  auto& req = e->request;
  req.set_op(op);
  req.set_tensor_name(name);
  req.set_dtype(static_cast<v1::DataType>(input.dtype));
  req.set_reduce_op(static_cast<v1::ReduceOp>(rop));
  req.set_root_rank(root);
  req.set_prescale_factor(prescale);
  req.set_postscale_factor(postscale);
  for (auto d : input.shape)
    req.add_shape(d);
  req.set_device_kind(static_cast<v1::DeviceKind>(input.device.kind));
  req.set_device_ordinal(input.device.ordinal);
  return e;
}

// What is wrong with `e` (empty when fine): the request-level checks,
// which the coordinator repeats for every request it receives, then what
// only this rank can see (memory and the device's backend).
std::string finish(const actors::tensor_entry& e) {
  if (auto err = check_request(e.request); !err.empty())
    return err;
  const auto& t = e.input;
  const auto& name = e.request.tensor_name();
  if (e.request.op() != v1::OP_TYPE_JOIN && name == join_tensor_name)
    return std::string(properties(e.request.op()).label) + " of '" + name +
           "': that name is reserved for join()";
  if (t.data == nullptr && num_elements(t.shape) > 0)
    return "tensor '" + name + "': null data pointer for a non-empty tensor";
  if (auto missing = backends::missing_backend(t.device.kind); !missing.empty())
    return "tensor '" + name + "' is on " + to_string(t.device) + ", but " + missing;
  // Without an allocator a result goes to handle::output(), host memory.
  const auto op = e.request.op();
  if (t.device.kind != device_kind::cpu && !e.allocate &&
      (op == v1::OP_TYPE_ALLGATHER || op == v1::OP_TYPE_ALLTOALL ||
       op == v1::OP_TYPE_REDUCESCATTER))
    return "tensor '" + name + "' is on " + to_string(t.device) +
           ": the result of its " + properties(op).name +
           " goes to device memory, so it needs an output_allocator";
  return {};
}

} // namespace

prepared prepare_allreduce(const tensor& input, const tensor& output, const std::string& name,
                           reduce_op op, double prescale, double postscale, int set_size) {
  auto e =
    describe(v1::OP_TYPE_ALLREDUCE, input, output, name, op, 0, prescale, postscale, {}, {});
  if (auto err = finish(*e); !err.empty())
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
  return ok(std::move(e));
}

prepared prepare_reducescatter(const tensor& input, const std::string& name, reduce_op op,
                               double prescale, double postscale,
                               const output_allocator& allocate) {
  auto e = describe(v1::OP_TYPE_REDUCESCATTER, input, input, name, op, 0, prescale, postscale,
                      {}, allocate);
  if (auto err = finish(*e); !err.empty())
    return invalid(err);
  return ok(std::move(e));
}

prepared prepare_allgather(const tensor& input, const std::string& name,
                           const output_allocator& allocate) {
  auto e = describe(v1::OP_TYPE_ALLGATHER, input, input, name, reduce_op::sum, 0, 1.0, 1.0, {},
                      allocate);
  if (auto err = finish(*e); !err.empty())
    return invalid(err);
  return ok(std::move(e));
}

prepared prepare_alltoall(const tensor& input, const std::string& name,
                          const std::vector<int64_t>& splits, int set_size,
                          const output_allocator& allocate) {
  auto e = describe(v1::OP_TYPE_ALLTOALL, input, input, name, reduce_op::sum, 0, 1.0, 1.0,
                      splits, allocate);
  if (auto err = finish(*e); !err.empty())
    return invalid(err);
  const auto where = "alltoall of '" + name + "': ";
  const int64_t rows = input.shape[0];  // not a scalar: finish() checked
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
      if (s > rows - sum)  // sum + s > rows, without the overflow
        return invalid(where + "Sum of splits entries is greater than the first dimension of "
                               "tensor.");
      sum += s;
    }
  }
  return ok(std::move(e));
}

prepared prepare_broadcast(const tensor& t, int root_rank, const std::string& name,
                           int set_size) {
  auto e =
    describe(v1::OP_TYPE_BROADCAST, t, t, name, reduce_op::sum, root_rank, 1.0, 1.0, {}, {});
  if (auto err = finish(*e); !err.empty())
    return invalid(err);
  if (root_rank < 0 || root_rank >= set_size)
    return invalid("broadcast of '" + name + "': root rank " + std::to_string(root_rank) +
                   " is outside [0, " + std::to_string(set_size) + ")");
  return ok(std::move(e));
}

// Barrier and join carry no tensor.
prepared prepare_tensorless(v1::OpType op, const std::string& name) {
  const tensor none{nullptr, data_type::uint8, {0}};
  auto e = describe(op, none, none, name, reduce_op::sum, 0, 1.0, 1.0, {}, {});
  if (auto err = finish(*e); !err.empty())
    return invalid(err);
  return ok(std::move(e));
}

prepared prepare_barrier() {
  return prepare_tensorless(v1::OP_TYPE_BARRIER, "barrier.noname");
}

prepared prepare_join() {
  return prepare_tensorless(v1::OP_TYPE_JOIN, join_tensor_name);
}

} // namespace troupe::api
