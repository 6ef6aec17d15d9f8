// The free-function C++ API's collectives and queries, on this process's
// runtime (api/process_runtime.hpp: init(), shutdown() and the one
// process-level pointer).
#include "troupe/troupe.hpp"

#include <algorithm>
#include <cstring>

#include "api/process_runtime.hpp"
#include "api/submission.hpp"
#include "backends/registry.hpp"
#include "workers/runtime.hpp"

namespace troupe {

using api::no_runtime;
using api::runtime_now;
using api::sigpipe_blocked;

namespace {

handle failed(const status& s) {
  auto state = std::make_shared<detail::handle_state>();
  state->complete(s);
  return handle{std::move(state)};
}

// The process set a collective runs on, as this rank sees it, or the
// error that fails the collective (Horovod's texts).
struct set_view {
  std::shared_ptr<workers::runtime> rt;
  int32_t id = 0;
  workers::runtime::set_lookup found;  // size, root_index: the set rank of
                                       // the global rank resolve() was asked about
  status error;
};

// Submits one collective, or a group (`group` non-empty) that is accepted,
// negotiated and run as a whole: one failed check fails every member.
std::vector<handle> submit(std::vector<api::prepared> items, const set_view& set,
                           const std::string& group = "") {
  std::vector<handle> handles;
  for (const auto& item : items)
    if (!item.entry) {
      const auto s = group.empty() ? item.error
                                   : status{item.error.code(),
                                            "group '" + group + "': " + item.error.message()};
      return std::vector<handle>(items.size(), failed(s));
    }
  actors::entry_batch batch;
  for (auto& item : items) {
    auto e = std::move(item.entry);
    e->process_set_id = static_cast<uint32_t>(set.id);
    if (!group.empty()) {
      e->request.set_group_name(group);
      e->request.set_group_size(static_cast<int32_t>(items.size()));
    }
    handles.emplace_back(actors::handle_of(e));
    batch.push_back(std::move(e));
  }
  set.rt->submit(std::move(batch), set.found);
  return handles;
}

// One collective, without the group path's vectors: a training step
// submits hundreds of these, and each allocation is on the caller's
// thread, before negotiation can finish.
handle submit_one(api::prepared&& item, const set_view& set) {
  if (!item.entry)
    return failed(item.error);
  auto e = std::move(item.entry);
  e->process_set_id = static_cast<uint32_t>(set.id);
  handle h{actors::handle_of(e)};
  actors::entry_batch batch;
  batch.push_back(std::move(e));
  set.rt->submit(std::move(batch), set.found);
  return h;
}

// Reads what a collective needs of its set, copying nothing per call: its
// size, and the set rank of `global_root` when given.
set_view resolve(const process_set& set, const char* op, int global_root = -1) {
  set_view v;
  v.id = set.id;
  v.rt = runtime_now();
  if (!v.rt) {
    v.error = no_runtime();
    return v;
  }
  v.found = v.rt->lookup(set.id, global_root);
  const auto& found = v.found;
  if (!found.unavailable.ok()) {
    v.error = found.unavailable;
    return v;
  }
  if (!found.known) {
    v.error = {status_code::invalid_argument,
               std::string(op) + ": Process set provided does not exist, or has not been "
                                 "registered."};
    return v;
  }
  if (found.my_index < 0)
    v.error = {status_code::invalid_argument,
               std::string(op) + ": Rank " + std::to_string(v.rt->id()->rank) +
                 " is not a member of the provided process set."};
  return v;
}

std::vector<handle> failed_all(size_t n, const status& s) {
  return std::vector<handle>(n, failed(s));
}

std::string member_name(const std::string& group, size_t i) {
  return group + "." + std::to_string(i);
}

// A grouped collective takes no allocator or one per member.
status check_allocators(const std::vector<tensor>& inputs,
                        const std::vector<output_allocator>& allocators,
                        const std::string& group) {
  if (allocators.empty() || allocators.size() == inputs.size())
    return {};
  return {status_code::invalid_argument,
          "group '" + group + "': " + std::to_string(inputs.size()) + " inputs but " +
            std::to_string(allocators.size()) + " output allocators"};
}

output_allocator allocator_of(const std::vector<output_allocator>& allocators, size_t i) {
  return allocators.empty() ? output_allocator{} : allocators[i];
}

template <class F>
int identity_field(F field) {
  const auto id = api::identity_now();
  return id ? field(*id) : -1;
}

} // namespace

status start_timeline(const std::string& path, bool mark_cycles) {
  auto rt = runtime_now();
  if (!rt)
    return no_runtime();
  if (path.empty())
    return {status_code::invalid_argument, "start_timeline needs a file name."};
  return rt->start_timeline(path, mark_cycles);
}

status stop_timeline() {
  auto rt = runtime_now();
  if (!rt)
    return no_runtime();
  return rt->stop_timeline();
}

status reset() {
  auto rt = runtime_now();
  if (!rt)
    return no_runtime();
  sigpipe_blocked threads_started_here;
  return rt->reset();
}

int64_t epoch() {
  auto rt = runtime_now();
  return rt ? rt->epoch() : -1;
}

host_update hosts_updated() {
  auto rt = runtime_now();
  return rt ? rt->hosts_updated() : host_update::none;
}

bool epoch_has_newcomers() {
  auto rt = runtime_now();
  return rt && rt->epoch_has_newcomers();
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

namespace {

// The CPU library of `rt`'s collectives, where built (empty otherwise).
std::string cpu_library(const workers::runtime& rt) {
  const auto chosen = backends::chosen_cpu_backend(rt.cfg().cpu_operations, rt.id()->has_store());
  const auto built = backends::built_cpu_backends();
  return std::find(built.begin(), built.end(), chosen) != built.end() ? chosen : std::string();
}

} // namespace

bool mpi_enabled() {
  auto rt = runtime_now();
  return rt && cpu_library(*rt) == "mpi";
}

bool gloo_enabled() {
  auto rt = runtime_now();
  return rt && cpu_library(*rt) == "gloo";
}

int mpi_threads_supported() {
  auto rt = runtime_now();
  if (!rt || cpu_library(*rt) != "mpi")
    return -1;
  if (backends::mpi_started())
    return backends::mpi_thread_multiple() ? 1 : 0;
  return rt->cfg().mpi_threads_disable ? 0 : 1;
}

int cross_rank() {
  return identity_field([](const workers::identity& id) { return id.cross_rank; });
}
int cross_size() {
  return identity_field([](const workers::identity& id) { return id.cross_size; });
}

handle allreduce(const tensor& input, const tensor& output, const std::string& name,
                 reduce_op op, double prescale_factor, double postscale_factor,
                 const process_set& set) {
  auto v = resolve(set, "Allreduce");
  if (!v.error.ok())
    return failed(v.error);
  return submit_one(api::prepare_allreduce(input, output, name, op, prescale_factor,
                                           postscale_factor, v.found.size),
                    v);
}

handle reducescatter(const tensor& input, const std::string& name, reduce_op op,
                     double prescale_factor, double postscale_factor, const process_set& set,
                     const output_allocator& allocate) {
  auto v = resolve(set, "Reducescatter");
  if (!v.error.ok())
    return failed(v.error);
  return submit_one(
    api::prepare_reducescatter(input, name, op, prescale_factor, postscale_factor, allocate),
    v);
}

handle allgather(const tensor& input, const std::string& name, const process_set& set,
                 const output_allocator& allocate) {
  auto v = resolve(set, "Allgather");
  if (!v.error.ok())
    return failed(v.error);
  return submit_one(api::prepare_allgather(input, name, allocate), v);
}

handle alltoall(const tensor& input, const std::string& name,
                const std::vector<int64_t>& splits, const process_set& set,
                const output_allocator& allocate) {
  auto v = resolve(set, "Alltoall");
  if (!v.error.ok())
    return failed(v.error);
  return submit_one(api::prepare_alltoall(input, name, splits, v.found.size, allocate), v);
}

handle broadcast(const tensor& t, int root_rank, const std::string& name,
                 const process_set& set) {
  // Roots are global ranks; the set's backend counts from its first member.
  auto v = resolve(set, "Broadcast", root_rank);
  if (!v.error.ok())
    return failed(v.error);
  int root = v.found.root_index;
  if (root < 0 && v.id != 0)
    return failed({status_code::invalid_argument,
                   "broadcast received invalid root rank " + std::to_string(root_rank) +
                     " for provided process set"});
  if (root < 0)
    root = root_rank;  // outside the job: prepare_broadcast names the range
  return submit_one(api::prepare_broadcast(t, root, name, v.found.size), v);
}

handle barrier(const process_set& set) {
  auto v = resolve(set, "Barrier");
  if (!v.error.ok())
    return failed(v.error);
  return submit_one(api::prepare_barrier(), v);
}

handle join(const process_set& set) {
  auto v = resolve(set, "Join");
  if (!v.error.ok())
    return failed(v.error);
  return submit_one(api::prepare_join(), v);
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
                                      double prescale_factor, double postscale_factor,
                                      const process_set& set) {
  if (outputs.size() != inputs.size())
    return failed_all(inputs.size(),
                      {status_code::invalid_argument,
                       "group '" + name + "': " + std::to_string(inputs.size()) +
                         " inputs but " + std::to_string(outputs.size()) + " outputs"});
  auto v = resolve(set, "Allreduce");
  if (!v.error.ok())
    return failed_all(inputs.size(), v.error);
  std::vector<api::prepared> items;
  for (size_t i = 0; i < inputs.size(); ++i)
    items.push_back(api::prepare_allreduce(inputs[i], outputs[i], member_name(name, i), op,
                                           prescale_factor, postscale_factor, v.found.size));
  return submit(std::move(items), v, name);
}

std::vector<handle> grouped_allgather(const std::vector<tensor>& inputs,
                                      const std::string& name, const process_set& set,
                                      const std::vector<output_allocator>& allocators) {
  if (auto s = check_allocators(inputs, allocators, name); !s.ok())
    return failed_all(inputs.size(), s);
  auto v = resolve(set, "Allgather");
  if (!v.error.ok())
    return failed_all(inputs.size(), v.error);
  std::vector<api::prepared> items;
  for (size_t i = 0; i < inputs.size(); ++i)
    items.push_back(
      api::prepare_allgather(inputs[i], member_name(name, i), allocator_of(allocators, i)));
  return submit(std::move(items), v, name);
}

std::vector<handle> grouped_reducescatter(const std::vector<tensor>& inputs,
                                          const std::string& name, reduce_op op,
                                          double prescale_factor, double postscale_factor,
                                          const process_set& set,
                                          const std::vector<output_allocator>& allocators) {
  if (auto s = check_allocators(inputs, allocators, name); !s.ok())
    return failed_all(inputs.size(), s);
  auto v = resolve(set, "Reducescatter");
  if (!v.error.ok())
    return failed_all(inputs.size(), v.error);
  std::vector<api::prepared> items;
  for (size_t i = 0; i < inputs.size(); ++i)
    items.push_back(api::prepare_reducescatter(inputs[i], member_name(name, i), op,
                                               prescale_factor, postscale_factor,
                                               allocator_of(allocators, i)));
  return submit(std::move(items), v, name);
}

process_set global_process_set() {
  process_set all;
  if (auto rt = runtime_now())
    all.ranks = rt->process_set_ranks(0);
  return all;
}

// Runs a dynamic process-set change (`verb`: adding / removing), if the
// runtime allows them. No lock is held while the ranks agree.
template <class F>
status change_process_sets(const char* verb, F change) {
  auto rt = runtime_now();
  if (!rt)
    return no_runtime();
  if (!rt->cfg().dynamic_process_sets)
    return {status_code::invalid_argument,
            std::string("Set TROUPE_DYNAMIC_PROCESS_SETS=1 (or HOROVOD_DYNAMIC_PROCESS_SETS=1) "
                        "to allow ") +
              verb + " process sets after Troupe initialization."};
  sigpipe_blocked threads_started_here;
  return change(*rt);
}

status add_process_set(const std::vector<int>& ranks, process_set& out) {
  return change_process_sets("adding", [&](workers::runtime& rt) {
    int32_t id = 0;
    auto s = rt.add_process_set(ranks, id);
    if (s.ok())
      out = process_set{id, rt.process_set_ranks(id)};
    return s;
  });
}

status tune(const tuning& change, const process_set& set) {
  auto rt = runtime_now();
  if (!rt)
    return no_runtime();
  return rt->tune(set.id, change);
}

status remove_process_set(const process_set& set) {
  return change_process_sets(
    "removing", [&](workers::runtime& rt) { return rt.remove_process_set(set.id); });
}

bool process_set::included() const {
  return rank() >= 0;
}

int process_set::rank() const {
  const int me = troupe::rank();
  const auto& members = id == 0 && ranks.empty() ? global_process_set().ranks : ranks;
  auto it = std::find(members.begin(), members.end(), me);
  return me < 0 || it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

int process_set::size() const {
  return id == 0 && ranks.empty() ? troupe::size() : static_cast<int>(ranks.size());
}

std::string process_set::to_string() const {
  std::string list;
  for (auto r : id == 0 && ranks.empty() ? global_process_set().ranks : ranks)
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  return "ProcessSet(process_set_id=" + std::to_string(id) + ", ranks=[" + list +
         "], mpi_comm=None)";
}

} // namespace troupe
