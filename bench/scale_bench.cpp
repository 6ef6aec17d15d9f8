// The control plane at scale, simulated in one process: the real
// coordinator actor (message table, response cache, fusion) driven by N
// simulated members that send realistic RequestLists (the negotiator's
// format: full requests, then cache ids) and apply every ResponseList to a
// cache view, as members do. CAF's deterministic scheduler runs every
// message in this thread, so the coordinator's own CPU time is measured
// message by message (thread CPU clock), apart from the simulation's.
//
//   scale_bench [--ranks 2,64,256,1024] [--workload resnet50|small]
//               [--steps 4] [--order ascending|random] [--lists step|tensor]
//               [--cache on|off|both] [--fanout F] [--ranks-per-host K]
//               [--json FILE]
//
// With --fanout F the members form the control tree (coordinator/
// control_tree.hpp): a rank sends to its tree parent, inner nodes aggregate
// their subtree's cache hits (control/hit_aggregator.hpp, the real
// class, each node's CPU timed apart) and forward at once what they have,
// and the coordinator sends lists to the root's children only. With
// --ranks-per-host K the members say they are on hosts of K ranks, and the
// tree follows the hosts (one aggregate per host up to its leader's
// parent).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <malloc.h>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/cache_view.hpp"
#include "control/hit_aggregator.hpp"
#include "bench/workloads.hpp"
#include "coordinator/coordinator_actor.hpp"
#include "metrics/rank_metrics.hpp"

namespace troupe::bench {
namespace {

using namespace troupe::actors;
using caf::scheduler::test_coordinator;

struct options {
  std::vector<int> ranks{2, 64, 256, 1024};
  std::string workload = "resnet50";
  int steps = 4;
  bool random_order = false;
  bool list_per_tensor = false;
  std::vector<bool> cache{true, false};
  int fanout = 0;  // 0: a star
  int ranks_per_host = 0;  // 0: one host
  std::string json;
};

// One configuration's medians over the measured steps.
struct result {
  int ranks = 0;
  bool cache = false;
  double coordinator_ms = 0;   // coordinator CPU per step
  double node_ms = 0;          // the busiest inner tree node's CPU per step
  double bytes_in = 0;         // RequestList bytes into the coordinator per step
  double bytes_out = 0;        // ResponseList bytes out of it per step
  double messages_in = 0;
  double messages_out = 0;
  double lists = 0;            // response lists per step
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Stands in for every member's negotiator: counts what the coordinator
// sends and keeps one copy of each list (all members get the same bytes).
struct member_inbox {
  int32_t members = 0;
  uint64_t received = 0;
  uint64_t bytes = 0;
  std::vector<std::string> lists;
};

caf::behavior member(caf::event_based_actor*, member_inbox* box) {
  return {
    [=](response_atom, int64_t, uint32_t, const std::string& bytes) {
      if (box->received++ % static_cast<uint64_t>(box->members) == 0)
        box->lists.push_back(bytes);
      box->bytes += bytes.size();
    },
    // Its place in the control tree: the simulation routes by the same
    // control_tree_node.
    [=](tree_atom, int32_t, int32_t, const std::vector<int32_t>&, const caf::actor&,
        const std::vector<caf::actor>&) {
      return true;
    },
  };
}

v1::Request gradient_request(size_t index, size_t count) {
  v1::Request r;
  r.set_tensor_name("grad." + std::to_string(index));
  r.set_op(v1::OP_TYPE_ALLREDUCE);
  r.set_dtype(v1::DATA_TYPE_FLOAT32);
  r.set_reduce_op(v1::REDUCE_OP_AVERAGE);
  r.set_prescale_factor(1);
  r.set_postscale_factor(1);
  r.add_shape(static_cast<int64_t>(count));
  return r;
}

class simulation {
public:
  simulation(const options& opt, const workload& w, int ranks, bool cache)
    : opt_(opt), ranks_(ranks), sys_(configured(cfg_)),
      sched_(dynamic_cast<test_coordinator&>(sys_.scheduler())),
      metrics_(std::make_shared<metrics::rank_metrics>(metrics::rank_position{0, ranks, 0},
                                                       "sim")),
      rng_(42) {
    for (size_t i = 0; i < w.counts.size(); ++i)
      requests_.push_back(gradient_request(i, w.counts[i]));
    coordinator::coordinator_options o;
    o.stall.enabled = false;
    o.fusion_threshold = 64 << 20;  // Horovod's default
    o.cache_capacity = cache ? 1024 : 0;
    o.tree_fanout = opt.fanout;
    std::vector<std::string> hosts;
    for (int32_t r = 0; r < ranks; ++r)
      hosts.push_back("host" + std::to_string(opt.ranks_per_host > 0 ? r / opt.ranks_per_host : 0));
    const auto starts = control::host_starts(hosts);
    for (int32_t r = 0; r < ranks; ++r) {
      nodes_.push_back(control::control_tree_node(r, ranks, opt.fanout, starts));
      aggregators_.emplace_back();
      if (r > 0 && !nodes_.back().children.empty())
        aggregators_.back().emplace(nodes_.back(), std::chrono::hours(1),
                                    [this](uint32_t id, uint64_t list) {
                                      return view_.name_of(id, list);
                                    });
    }
    node_seconds_.assign(static_cast<size_t>(ranks), 0);
    coordinator_ = coordinator::spawn_coordinator(sys_, 0, ranks, o,
                                                  metrics_->for_set(0, ranks, "sim"));
    coordinator_job_ =
      dynamic_cast<caf::resumable*>(caf::actor_cast<caf::abstract_actor*>(coordinator_));
    inbox_.members = static_cast<int32_t>(nodes_.front().children.size()) + 1;
    member_ = caf::actor_cast<member_actor>(sys_.spawn(member, &inbox_));
    for (int32_t r = 0; r < ranks; ++r)
      caf::anon_send(coordinator_, hello_atom::value, r, member_, false,
                     hosts[static_cast<size_t>(r)]);
    run();
  }

  ~simulation() {
    caf::anon_send_exit(coordinator_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(member_, caf::exit_reason::user_shutdown);
    sched_.run();
  }

  // One training step: every rank submits every tensor; returns when every
  // tensor has been in a response list.
  result step() {
    result out;
    const auto before_in = std::make_pair(messages_in_, bytes_in_);
    const auto before_out = std::make_pair(inbox_.received, inbox_.bytes);
    coordinator_seconds_ = 0;
    std::fill(node_seconds_.begin(), node_seconds_.end(), 0.0);
    std::vector<std::vector<size_t>> order(static_cast<size_t>(ranks_));
    for (auto& o : order) {
      o.resize(requests_.size());
      for (size_t i = 0; i < o.size(); ++i)
        o[i] = i;
      if (opt_.random_order)
        std::shuffle(o.begin(), o.end(), rng_);
    }
    std::vector<int32_t> rank_order(static_cast<size_t>(ranks_));
    for (int32_t r = 0; r < ranks_; ++r)
      rank_order[static_cast<size_t>(r)] = r;
    if (opt_.random_order)
      std::shuffle(rank_order.begin(), rank_order.end(), rng_);
    size_t done = 0;
    if (opt_.list_per_tensor) {
      // Gradients one at a time, as backward produces them: each rank
      // sends one list per tensor; ranks interleave.
      for (size_t k = 0; k < requests_.size(); ++k)
        for (auto r : rank_order)
          send({order[static_cast<size_t>(r)][k]}, r);
    } else {
      for (auto r : rank_order)
        send(order[static_cast<size_t>(r)], r);
    }
    while (done < requests_.size()) {
      run();
      if (inbox_.lists.empty())
        throw std::runtime_error("the coordinator stopped answering");
      for (auto& bytes : std::exchange(inbox_.lists, {}))
        done += apply(bytes);
      ++out.lists;
    }
    out.ranks = ranks_;
    out.coordinator_ms = coordinator_seconds_ * 1e3;
    out.node_ms = *std::max_element(node_seconds_.begin(), node_seconds_.end()) * 1e3;
    out.messages_in = static_cast<double>(messages_in_ - before_in.first);
    out.bytes_in = static_cast<double>(bytes_in_ - before_in.second);
    out.messages_out = static_cast<double>(inbox_.received - before_out.first);
    out.bytes_out = static_cast<double>(inbox_.bytes - before_out.second);
    return out;
  }

private:
  static caf::actor_system_config& configured(caf::actor_system_config& cfg) {
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    return cfg;
  }

  // Runs every queued message, timing the coordinator's.
  void run() {
    while (sched_.has_job()) {
      if (sched_.jobs.front() != coordinator_job_) {
        sched_.run_once();
        continue;
      }
      const double start = thread_cpu_seconds();
      sched_.run_once();
      coordinator_seconds_ += thread_cpu_seconds() - start;
    }
  }

  // What the negotiator of `rank` sends for tensors `which`.
  void send(const std::vector<size_t>& which, int32_t rank) {
    v1::RequestList list;
    list.set_lists_applied(view_.lists_applied());
    list.set_sender_rank(rank);
    list.set_ranks_end(rank + 1);
    for (auto i : which) {
      auto* req = list.add_requests();
      if (auto ref = view_.hit(requests_[i])) {
        req->set_cache_id(ref.id);
        req->set_cache_list(ref.list);
      } else {
        *req = requests_[i];
      }
      req->set_request_rank(rank);
    }
    // An inner node's own member goes through the node's aggregator too.
    const auto& node = nodes_[static_cast<size_t>(rank)];
    deliver(list.SerializeAsString(), rank == 0 || aggregators_[static_cast<size_t>(rank)]
                                        ? rank
                                        : node.parent);
  }

  // Hands a list to tree node `to`: the coordinator at the root, else the
  // node's aggregator, which forwards at once whatever it has to send to its
  // parent (its parsing and serialising timed with it).
  void deliver(std::string bytes, int32_t to) {
    if (to == 0) {
      ++messages_in_;
      bytes_in_ += bytes.size();
      caf::anon_send(coordinator_, request_atom::value, int64_t{0}, 0u, std::move(bytes));
      return;
    }
    auto& node = *aggregators_[static_cast<size_t>(to)];
    const double start = thread_cpu_seconds();
    v1::RequestList in;
    in.ParseFromString(bytes);
    const auto now = control::hit_aggregator::clock::now();
    node.add(in, now);
    auto up = node.take(now);
    std::string up_bytes = up ? up->SerializeAsString() : std::string();
    node_seconds_[static_cast<size_t>(to)] += thread_cpu_seconds() - start;
    if (up)
      deliver(std::move(up_bytes), nodes_[static_cast<size_t>(to)].parent);
  }

  // Applies one response list as every member does, tells the coordinator
  // it ran, and returns the tensors it covered. Each inner node first ends
  // its rounds of the list's tensors (timed with it), as its negotiator
  // does before passing the list on.
  size_t apply(const std::string& bytes) {
    v1::ResponseList list;
    list.ParseFromString(bytes);
    for (size_t r = 0; r < aggregators_.size(); ++r) {
      if (!aggregators_[r])
        continue;
      const double start = thread_cpu_seconds();
      const bool released = aggregators_[r]->answered(list);
      node_seconds_[r] += thread_cpu_seconds() - start;
      if (released)
        throw std::runtime_error("a node held requests its coordinator answered without");
    }
    size_t tensors = 0;
    for (const auto& resp : list.responses()) {
      if (resp.op() == v1::OP_TYPE_ERROR)
        throw std::runtime_error("unexpected error: " + resp.error().message());
      tensors += static_cast<size_t>(resp.tensor_names_size());
    }
    view_.apply(list, [&](const std::string& name) -> const v1::Request* {
      return &requests_[std::stoul(name.substr(5))];
    });
    caf::anon_send(coordinator_, executed_atom::value, list_stats{1, 0, 0});
    return tensors;
  }

  const options& opt_;
  int32_t ranks_;
  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  test_coordinator& sched_;
  std::shared_ptr<metrics::rank_metrics> metrics_;
  coordinator_actor coordinator_;
  caf::resumable* coordinator_job_ = nullptr;
  member_actor member_;
  member_inbox inbox_;
  std::vector<control::tree_node> nodes_;
  // By set rank: the aggregator of each inner node but the root.
  std::vector<std::optional<control::hit_aggregator>> aggregators_;
  std::vector<double> node_seconds_;
  std::vector<v1::Request> requests_;
  // Every simulated member applies the same lists: one view stands for all.
  cache_view view_;
  std::mt19937 rng_;
  uint64_t messages_in_ = 0;
  uint64_t bytes_in_ = 0;
  double coordinator_seconds_ = 0;
};

std::vector<int> parse_ints(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(std::stoi(item));
  return out;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--ranks")
      o.ranks = parse_ints(value);
    else if (flag == "--workload")
      o.workload = value;
    else if (flag == "--steps")
      o.steps = std::stoi(value);
    else if (flag == "--order")
      o.random_order = value == "random";
    else if (flag == "--lists")
      o.list_per_tensor = value == "tensor";
    else if (flag == "--cache")
      o.cache = value == "both" ? std::vector<bool>{true, false}
                                : std::vector<bool>{value == "on"};
    else if (flag == "--fanout")
      o.fanout = std::stoi(value);
    else if (flag == "--ranks-per-host")
      o.ranks_per_host = std::stoi(value);
    else if (flag == "--json")
      o.json = value;
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  return o;
}

workload chosen_workload(const options& o) {
  for (auto& w : make_workloads(false, TROUPE_BENCH_DATA_DIR "/resnet50_gradients.txt"))
    if ((o.workload == "resnet50" && w.name == "resnet50") ||
        (o.workload == "small" && w.name == "small_tensors"))
      return w;
  throw std::invalid_argument("unknown workload " + o.workload);
}

} // namespace
} // namespace troupe::bench

int main(int argc, char** argv) {
  using namespace troupe::bench;
  // Every simulated rank shares this one heap, unlike real ranks: with
  // glibc's fastbins, the frees of 1,023 simulated nodes were consolidated
  // on the coordinator's next large allocation and charged to it (up to
  // 2/3 of its measured time per step with one list per tensor).
  mallopt(M_MXFAST, 0);
  const auto opt = parse(argc, argv);
  const auto w = chosen_workload(opt);
  std::printf("workload %s (%zu tensors/step), order %s, %s, %d steps (median; cached: steps "
              "after the first two)\n",
              opt.workload.c_str(), w.counts.size(), opt.random_order ? "random" : "ascending",
              opt.list_per_tensor ? "one list per tensor" : "one list per rank and step",
              opt.steps);
  std::printf("control tree: %s, %s\n",
              opt.fanout > 0 ? ("fanout " + std::to_string(opt.fanout)).c_str() : "star",
              opt.ranks_per_host > 0
                ? (std::to_string(opt.ranks_per_host) + " ranks per host").c_str()
                : "one host");
  std::printf("%6s %5s %12s %12s %12s %12s %10s %10s %7s\n", "ranks", "cache", "coord ms/step",
              "node ms/step", "bytes in", "bytes out", "msgs in", "msgs out", "lists");
  std::vector<result> all;
  for (bool cache : opt.cache) {
    for (int n : opt.ranks) {
      simulation sim(opt, w, n, cache);
      std::vector<result> steps;
      const int warm = cache ? 2 : 0;
      for (int s = 0; s < warm + opt.steps; ++s) {
        auto r = sim.step();
        if (s >= warm)
          steps.push_back(r);
      }
      auto pick = [&](double result::*field) {
        std::vector<double> v;
        for (const auto& r : steps)
          v.push_back(r.*field);
        return median(v);
      };
      result m;
      m.ranks = n;
      m.cache = cache;
      m.coordinator_ms = pick(&result::coordinator_ms);
      m.node_ms = pick(&result::node_ms);
      m.bytes_in = pick(&result::bytes_in);
      m.bytes_out = pick(&result::bytes_out);
      m.messages_in = pick(&result::messages_in);
      m.messages_out = pick(&result::messages_out);
      m.lists = pick(&result::lists);
      std::printf("%6d %5s %12.2f %12.2f %12.0f %12.0f %10.0f %10.0f %7.0f\n", n,
                  cache ? "on" : "off", m.coordinator_ms, m.node_ms, m.bytes_in, m.bytes_out, m.messages_in, m.messages_out,
                  m.lists);
      std::fflush(stdout);
      all.push_back(m);
    }
  }
  if (!opt.json.empty()) {
    std::ofstream out(opt.json);
    out << "{\"workload\": \"" << opt.workload << "\", \"order\": \""
        << (opt.random_order ? "random" : "ascending") << "\", \"lists\": \""
        << (opt.list_per_tensor ? "tensor" : "step") << "\", \"fanout\": " << opt.fanout << ", \"ranks_per_host\": " << opt.ranks_per_host
        << ", \"rows\": [";
    for (size_t i = 0; i < all.size(); ++i) {
      const auto& r = all[i];
      out << (i ? ", " : "") << "{\"ranks\": " << r.ranks << ", \"cache\": "
          << (r.cache ? "true" : "false") << ", \"coordinator_ms\": " << r.coordinator_ms << ", \"node_ms\": " << r.node_ms
          << ", \"bytes_in\": " << r.bytes_in << ", \"bytes_out\": " << r.bytes_out
          << ", \"messages_in\": " << r.messages_in << ", \"messages_out\": " << r.messages_out
          << ", \"lists\": " << r.lists << "}";
    }
    out << "]}\n";
  }
  return 0;
}
