// The free-function C++ API. The only process-level state is the handle to
// this process's runtime (itself the root of all actor state), as a
// Horovod-style init()/shutdown() API requires.
#include "troupe/troupe.hpp"

#include <cstring>
#include <mutex>

#include "api/submission.hpp"
#include "workers/runtime.hpp"

namespace troupe {

namespace {

struct process_runtime {
  std::mutex mtx;
  std::unique_ptr<workers::runtime> rt;
  // Counts init() attempts that started a runtime, so that a re-init's
  // rendezvous keys never meet the previous run's (every rank re-inits the
  // same number of times).
  int starts = 0;
};

process_runtime& current() {
  static process_runtime instance;
  return instance;
}

const char* not_initialized = "Troupe has not been initialized; use troupe::init().";

handle failed(const status& s) {
  auto state = std::make_shared<detail::handle_state>();
  state->complete(s);
  return handle{std::move(state)};
}

actors::tensor_entry_ptr make_entry(api::submission sub) {
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
  return e;
}

// Submits one collective, or a group (`group` non-empty) that is accepted,
// negotiated and run as a whole: one failed check fails every member.
std::vector<handle> submit(std::vector<api::prepared> items, const std::string& group = "") {
  std::vector<handle> handles;
  for (const auto& item : items)
    if (!item.sub) {
      const auto s = group.empty() ? item.error
                                   : status{item.error.code(),
                                            "group '" + group + "': " + item.error.message()};
      return std::vector<handle>(items.size(), failed(s));
    }
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  if (!cur.rt)
    return std::vector<handle>(items.size(), failed({status_code::shut_down, not_initialized}));
  actors::entry_batch batch;
  for (auto& item : items) {
    auto e = make_entry(std::move(*item.sub));
    if (!group.empty()) {
      e->request.set_group_name(group);
      e->request.set_group_size(static_cast<int32_t>(items.size()));
    }
    handles.emplace_back(e->handle);
    batch.push_back(std::move(e));
  }
  cur.rt->submit(std::move(batch));
  return handles;
}

handle submit_one(api::prepared item) {
  std::vector<api::prepared> items;
  items.push_back(std::move(item));
  return submit(std::move(items)).front();
}

std::string member_name(const std::string& group, size_t i) {
  return group + "." + std::to_string(i);
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
  cur.rt = workers::runtime::start(result, cur.starts++);
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

status start_timeline(const std::string& path, bool mark_cycles) {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  if (!cur.rt)
    return {status_code::shut_down, not_initialized};
  if (path.empty())
    return {status_code::invalid_argument, "start_timeline needs a file name."};
  return cur.rt->start_timeline(path, mark_cycles);
}

status stop_timeline() {
  auto& cur = current();
  std::lock_guard<std::mutex> guard{cur.mtx};
  if (!cur.rt)
    return {status_code::shut_down, not_initialized};
  return cur.rt->stop_timeline();
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
  const int n = size();
  if (n < 0)
    return failed({status_code::shut_down, not_initialized});
  return submit_one(
    api::prepare_allreduce(input, output, name, op, prescale_factor, postscale_factor, n));
}

handle reducescatter(const tensor& input, const std::string& name, reduce_op op,
                     double prescale_factor, double postscale_factor) {
  return submit_one(
    api::prepare_reducescatter(input, name, op, prescale_factor, postscale_factor));
}

handle allgather(const tensor& input, const std::string& name) {
  return submit_one(api::prepare_allgather(input, name));
}

handle alltoall(const tensor& input, const std::string& name,
                const std::vector<int64_t>& splits) {
  const int n = size();
  if (n < 0)
    return failed({status_code::shut_down, not_initialized});
  return submit_one(api::prepare_alltoall(input, name, splits, n));
}

handle broadcast(const tensor& t, int root_rank, const std::string& name) {
  const int n = size();
  if (n < 0)
    return failed({status_code::shut_down, not_initialized});
  return submit_one(api::prepare_broadcast(t, root_rank, name, n));
}

handle barrier() {
  return submit_one(api::prepare_barrier());
}

handle join() {
  return submit_one(api::prepare_join());
}

int join_result(const handle& h) {
  int32_t last = -1;
  if (h.output().size() == sizeof last)
    std::memcpy(&last, h.output().data(), sizeof last);
  return last;
}

std::vector<handle> grouped_allreduce(const std::vector<tensor>& inputs,
                                      const std::vector<tensor>& outputs,
                                      const std::string& name, reduce_op op,
                                      double prescale_factor, double postscale_factor) {
  if (outputs.size() != inputs.size())
    return std::vector<handle>(
      inputs.size(), failed({status_code::invalid_argument,
                             "group '" + name + "': " + std::to_string(inputs.size()) +
                               " inputs but " + std::to_string(outputs.size()) + " outputs"}));
  const int n = size();
  if (n < 0)
    return std::vector<handle>(inputs.size(), failed({status_code::shut_down, not_initialized}));
  std::vector<api::prepared> items;
  for (size_t i = 0; i < inputs.size(); ++i)
    items.push_back(api::prepare_allreduce(inputs[i], outputs[i], member_name(name, i), op,
                                           prescale_factor, postscale_factor, n));
  return submit(std::move(items), name);
}

std::vector<handle> grouped_allgather(const std::vector<tensor>& inputs,
                                      const std::string& name) {
  std::vector<api::prepared> items;
  for (size_t i = 0; i < inputs.size(); ++i)
    items.push_back(api::prepare_allgather(inputs[i], member_name(name, i)));
  return submit(std::move(items), name);
}

std::vector<handle> grouped_reducescatter(const std::vector<tensor>& inputs,
                                          const std::string& name, reduce_op op,
                                          double prescale_factor, double postscale_factor) {
  std::vector<api::prepared> items;
  for (size_t i = 0; i < inputs.size(); ++i)
    items.push_back(api::prepare_reducescatter(inputs[i], member_name(name, i), op,
                                               prescale_factor, postscale_factor));
  return submit(std::move(items), name);
}

} // namespace troupe
