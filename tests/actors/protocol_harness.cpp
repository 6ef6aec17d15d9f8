#include "protocol_harness.hpp"

namespace troupe::actors::protocol_test {

caf::actor_system_config& testing_config(caf::actor_system_config& cfg) {
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  return cfg;
}

caf::behavior recorder(caf::event_based_actor*, inbox* box) {
  return {
    [=](hello_atom, int32_t set_rank, const member_actor& member, bool, const std::string&) {
      box->hellos.emplace_back(set_rank, member);
      box->order.emplace_back("hello");
    },
    [=](request_atom, int64_t, uint32_t, const std::string& bytes) {
      box->requests.push_back(bytes);
      box->order.emplace_back("request");
    },
    [=](response_atom, int64_t, uint32_t, const std::string& bytes) {
      box->responses.push_back(bytes);
    },
    [=](executed_atom, const list_stats& s) { box->executed.push_back(s); },
  };
}

backend_actor::behavior_type fake_backend(backend_actor::pointer self, inbox* box,
                                          uint64_t moved, bool answer) {
  return {
    [=](connect_atom) { return status{}; },
    [=](abort_atom, const status&) { ++box->aborts; },
    [=](poll_atom) {},
    [=](execute_atom,
        const collective_work_ptr& w) -> caf::result<executed_atom, uint64_t, status, list_stats> {
      box->works.push_back(w);
      if (answer)
        return {executed_atom::value, w->id, status{}, list_stats{0, moved, 0.25}};
      box->running.push_back(
        self->make_response_promise<executed_atom, uint64_t, status, list_stats>());
      return box->running.back();
    },
  };
}

v1::Request request(int rank, const std::string& name, int64_t length) {
  v1::Request r;
  r.set_request_rank(rank);
  r.set_tensor_name(name);
  r.set_op(v1::OP_TYPE_ALLREDUCE);
  r.set_dtype(v1::DATA_TYPE_FLOAT32);
  r.set_reduce_op(v1::REDUCE_OP_SUM);
  r.set_prescale_factor(1);
  r.set_postscale_factor(1);
  r.add_shape(length);
  return r;
}

tensor_entry_ptr entry(const std::string& name, std::vector<float>& x) {
  auto e = std::make_shared<tensor_entry>();
  e->request = request(0, name, static_cast<int64_t>(x.size()));
  e->input = e->output = tensor{x.data(), data_type::float32, {static_cast<int64_t>(x.size())}};
  return e;
}

tensor_entry_ptr again_of(const tensor_entry& e) {
  auto copy = std::make_shared<tensor_entry>(e);
  copy->handle = &copy->state;
  copy->launched = false;  // a new submission
  return copy;
}

std::string request_list(std::vector<v1::Request> requests,
                         std::optional<v1::Tuning> tuning) {
  v1::RequestList list;
  for (auto& r : requests)
    *list.add_requests() = std::move(r);
  if (tuning)
    *list.mutable_tuning() = *tuning;
  return list.SerializeAsString();
}

v1::ResponseList parsed(const std::string& bytes) {
  v1::ResponseList list;
  EXPECT_TRUE(list.ParseFromString(bytes));
  return list;
}

tensor_entry_ptr entry_on(const std::string& name, std::vector<float>& x, v1::DeviceKind kind) {
  auto e = entry(name, x);
  e->request.set_device_kind(kind);
  e->request.set_device_ordinal(kind == v1::DEVICE_KIND_CUDA ? 1 : 0);
  return e;
}

std::string response_on(const std::string& name, v1::DeviceKind kind) {
  v1::ResponseList list;
  auto* resp = list.add_responses();
  resp->set_op(v1::OP_TYPE_ALLREDUCE);
  resp->set_device_kind(kind);
  resp->add_tensor_names(name);
  resp->add_tensor_sizes(2);
  return list.SerializeAsString();
}

} // namespace troupe::actors::protocol_test
