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

bool supported(data_type dtype) {
  switch (dtype) {
    case data_type::float32:
    case data_type::float64:
    case data_type::int32:
    case data_type::int64:
      return true;
    default:
      return false;
  }
}

// Checks what one rank can check alone; returns an error text or "".
std::string validate(const tensor& t, const std::string& name) {
  if (name.empty())
    return "a collective needs a non-empty tensor name";
  if (!supported(t.dtype))
    return std::string("tensor '") + name + "': dtype " + to_string(t.dtype) +
           " is not supported (float32, float64, int32, int64)";
  for (auto d : t.shape)
    if (d < 0)
      return "tensor '" + name + "': negative dimension in shape " + to_string(t.shape);
  if (t.data == nullptr && num_elements(t.shape) > 0)
    return "tensor '" + name + "': null data pointer for a non-empty tensor";
  return {};
}

handle submit(v1::OpType op, const tensor& input, const tensor& output,
              const std::string& name, reduce_op rop, int root) {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  if (!cur.rt)
    return failed(status_code::shut_down, not_initialized);
  auto e = std::make_shared<actors::tensor_entry>();
  e->request.set_op(op);
  e->request.set_tensor_name(name);
  e->request.set_dtype(static_cast<v1::DataType>(input.dtype));
  e->request.set_reduce_op(static_cast<v1::ReduceOp>(rop));
  e->request.set_root_rank(root);
  e->request.set_prescale_factor(1.0);
  e->request.set_postscale_factor(1.0);
  for (auto d : input.shape)
    e->request.add_shape(d);
  e->input = input;
  e->output = output;
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
                 reduce_op op) {
  if (auto err = validate(input, name); !err.empty())
    return failed(status_code::invalid_argument, err);
  if (op != reduce_op::sum && op != reduce_op::average)
    return failed(status_code::invalid_argument,
                  "allreduce of '" + name + "': reduction " + to_string(op) +
                    " is not supported (sum, average)");
  if (output.dtype != input.dtype || output.shape != input.shape)
    return failed(status_code::invalid_argument,
                  "allreduce of '" + name + "': output " + to_string(output.dtype) +
                    to_string(output.shape) + " differs from input " +
                    to_string(input.dtype) + to_string(input.shape));
  if (output.data == nullptr && num_elements(output.shape) > 0)
    return failed(status_code::invalid_argument,
                  "allreduce of '" + name + "': null output pointer");
  return submit(v1::OP_TYPE_ALLREDUCE, input, output, name, op, 0);
}

handle allgather(const tensor& input, const std::string& name) {
  if (auto err = validate(input, name); !err.empty())
    return failed(status_code::invalid_argument, err);
  if (input.shape.empty())
    return failed(status_code::invalid_argument,
                  "allgather of '" + name + "': a scalar cannot be gathered; "
                  "give the tensor at least one dimension");
  return submit(v1::OP_TYPE_ALLGATHER, input, input, name, reduce_op::sum, 0);
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
  return submit(v1::OP_TYPE_BROADCAST, t, t, name, reduce_op::sum, root_rank);
}

} // namespace troupe
