// The free-function C++ API. The only process-level state is the handle to
// this process's runtime (itself the root of all actor state), as a
// Horovod-style init()/shutdown() API requires.
#include "troupe/troupe.hpp"

#include <mutex>

#include "workers/runtime.hpp"

namespace troupe {

namespace {

struct process_runtime {
  std::mutex mtx;
  std::unique_ptr<workers::runtime> rt;
};

process_runtime& current() {
  static process_runtime instance;
  return instance;
}

const char* not_initialized = "Troupe has not been initialized; use troupe::init().";

handle failed(status_code code, std::string message) {
  auto state = std::make_shared<detail::handle_state>();
  state->complete({code, std::move(message)});
  return handle{std::move(state)};
}

// Checks what one rank can check alone; returns an error text or "".
std::string validate(const tensor& t, const std::string& name) {
  if (name.empty())
    return "a collective needs a non-empty tensor name";
  if (element_size(t.dtype) == 0)
    return "tensor '" + name + "': unknown dtype " +
           std::to_string(static_cast<int>(t.dtype));
  for (auto d : t.shape)
    if (d < 0)
      return "tensor '" + name + "': negative dimension in shape " + to_string(t.shape);
  if (t.data == nullptr && num_elements(t.shape) > 0)
    return "tensor '" + name + "': null data pointer for a non-empty tensor";
  return {};
}

std::string validate_reduction(const tensor& t, const std::string& name, reduce_op op,
                               double prescale, double postscale) {
  if (op == reduce_op::adasum)
    return "allreduce of '" + name + "': Adasum is not available in this version";
  if (t.dtype == data_type::boolean &&
      (op == reduce_op::average || prescale != 1.0 || postscale != 1.0))
    return "tensor '" + name + "': bool supports sum, min, max and product without "
           "prescale/postscale factors";
  return {};
}

struct submission {
  v1::OpType op;
  tensor input;
  tensor output;
  std::string name;
  reduce_op rop = reduce_op::sum;
  int root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> splits;
};

handle submit(submission sub) {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  if (!cur.rt)
    return failed(status_code::shut_down, not_initialized);
  auto e = std::make_shared<actors::tensor_entry>();
  auto& req = e->request;
  req.set_op(sub.op);
  req.set_tensor_name(sub.name);
  req.set_dtype(static_cast<v1::DataType>(sub.input.dtype));
  req.set_reduce_op(static_cast<v1::ReduceOp>(sub.rop));
  req.set_root_rank(sub.root);
  req.set_prescale_factor(sub.prescale);
  req.set_postscale_factor(sub.postscale);
  for (auto d : sub.input.shape)
    req.add_shape(d);
  e->input = std::move(sub.input);
  e->output = std::move(sub.output);
  e->splits = std::move(sub.splits);
  e->handle = std::make_shared<detail::handle_state>();
  handle h{e->handle};
  cur.rt->submit(std::move(e));
  return h;
}

template <class F>
int identity_field(F field) {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  return cur.rt ? field(cur.rt->id()) : -1;
}

} // namespace

status init() {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  if (cur.rt)
    return {};
  status result;
  cur.rt = workers::runtime::start(result);
  return result;
}

void shutdown() {
  std::unique_ptr<workers::runtime> rt;
  {
    auto& cur = current();
    std::lock_guard<std::mutex> guard{cur.mtx};
    rt = std::move(cur.rt);
  }
  rt.reset();  // outside the lock: stopping may take a moment
}

bool is_initialized() {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  return cur.rt != nullptr;
}

int rank() {
  return identity_field([](const workers::identity& id) { return id.rank; });
}
int size() {
  return identity_field([](const workers::identity& id) { return id.size; });
}
int local_rank() {
  return identity_field([](const workers::identity& id) { return id.local_rank; });
}
int local_size() {
  return identity_field([](const workers::identity& id) { return id.local_size; });
}
int cross_rank() {
  return identity_field([](const workers::identity& id) { return id.cross_rank; });
}
int cross_size() {
  return identity_field([](const workers::identity& id) { return id.cross_size; });
}

handle allreduce(const tensor& input, const tensor& output, const std::string& name,
                 reduce_op op, double prescale_factor, double postscale_factor) {
  if (auto err = validate(input, name); !err.empty())
    return failed(status_code::invalid_argument, err);
  if (auto err = validate_reduction(input, name, op, prescale_factor, postscale_factor);
      !err.empty())
    return failed(status_code::invalid_argument, err);
  if (output.dtype != input.dtype || output.shape != input.shape)
    return failed(status_code::invalid_argument,
                  "allreduce of '" + name + "': output " + to_string(output.dtype) +
                    to_string(output.shape) + " differs from input " +
                    to_string(input.dtype) + to_string(input.shape));
  if (output.data == nullptr && num_elements(output.shape) > 0)
    return failed(status_code::invalid_argument,
                  "allreduce of '" + name + "': null output pointer");
  return submit({v1::OP_TYPE_ALLREDUCE, input, output, name, op, 0, prescale_factor,
                 postscale_factor, {}});
}

handle reducescatter(const tensor& input, const std::string& name, reduce_op op,
                     double prescale_factor, double postscale_factor) {
  if (auto err = validate(input, name); !err.empty())
    return failed(status_code::invalid_argument, err);
  if (op != reduce_op::sum && op != reduce_op::average)
    return failed(status_code::invalid_argument,
                  "reducescatter of '" + name +
                    "': Reducescatter currently only supports AVERAGE and SUM.");
  if (auto err = validate_reduction(input, name, op, prescale_factor, postscale_factor);
      !err.empty())
    return failed(status_code::invalid_argument, err);
  if (input.shape.empty())
    return failed(status_code::invalid_argument,
                  "reducescatter of '" + name + "': Reducescatter does not support scalar inputs");
  return submit({v1::OP_TYPE_REDUCESCATTER, input, input, name, op, 0, prescale_factor,
                 postscale_factor, {}});
}

handle allgather(const tensor& input, const std::string& name) {
  if (auto err = validate(input, name); !err.empty())
    return failed(status_code::invalid_argument, err);
  if (input.shape.empty())
    return failed(status_code::invalid_argument,
                  "allgather of '" + name + "': a scalar cannot be gathered; "
                  "give the tensor at least one dimension");
  return submit({v1::OP_TYPE_ALLGATHER, input, input, name, reduce_op::sum, 0, 1.0, 1.0, {}});
}

handle alltoall(const tensor& input, const std::string& name,
                const std::vector<int64_t>& splits) {
  if (auto err = validate(input, name); !err.empty())
    return failed(status_code::invalid_argument, err);
  const int n = size();
  if (n < 0)
    return failed(status_code::shut_down, not_initialized);
  const auto where = "alltoall of '" + name + "': ";
  if (input.shape.empty())
    return failed(status_code::invalid_argument,
                  where + "a scalar cannot be exchanged; give the tensor at least one "
                          "dimension");
  const int64_t rows = input.shape[0];
  if (splits.empty()) {
    if (rows % n != 0)
      return failed(status_code::invalid_argument,
                    where + "splits not provided, but first dimension of tensor is not an "
                            "even multiple of the number of workers.");
  } else {
    if (splits.size() != static_cast<size_t>(n))
      return failed(status_code::invalid_argument,
                    where + "Number of entries in splits does not equal number of workers.");
    int64_t sum = 0;
    for (auto s : splits) {
      if (s < 0)
        return failed(status_code::invalid_argument, where + "splits must not be negative.");
      sum += s;
    }
    if (sum > rows)
      return failed(status_code::invalid_argument,
                    where + "Sum of splits entries is greater than the first dimension of "
                            "tensor.");
  }
  return submit(
    {v1::OP_TYPE_ALLTOALL, input, input, name, reduce_op::sum, 0, 1.0, 1.0, splits});
}

handle barrier() {
  return submit({v1::OP_TYPE_BARRIER, tensor{nullptr, data_type::uint8, {0}},
                 tensor{nullptr, data_type::uint8, {0}}, "barrier.noname", reduce_op::sum, 0,
                 1.0, 1.0, {}});
}

handle broadcast(const tensor& t, int root_rank, const std::string& name) {
  if (auto err = validate(t, name); !err.empty())
    return failed(status_code::invalid_argument, err);
  const int n = size();
  if (n < 0)
    return failed(status_code::shut_down, not_initialized);
  if (root_rank < 0 || root_rank >= n)
    return failed(status_code::invalid_argument,
                  "broadcast of '" + name + "': root rank " + std::to_string(root_rank) +
                    " is outside [0, " + std::to_string(n) + ")");
  return submit({v1::OP_TYPE_BROADCAST, t, t, name, reduce_op::sum, root_rank, 1.0, 1.0, {}});
}

} // namespace troupe
