// Bootstrap through the embedded store at N simulated ranks (issue "Scale",
// item 5): each rank is a thread with its own authenticated client
// doing exactly the store traffic of a rank's start, so the store's one
// thread sees a real job's load. No CAF or Gloo connections are made (N^2
// sockets in one process); what is measured is the rendezvous.
//
//   bootstrap_bench [--ranks 256,512,1024] [--protocol exchange|per-peer|both]
//                   [--timeout SECONDS] [--json FILE]
//
// exchange: what the runtime does (workers/runtime.cpp, backends/gloo/
//   mesh_context.cpp): claim the endpoint, arrive_and_wait, one listing of
//   the endpoints; all_to_all of 136-byte Gloo pair addresses.
// per-peer: what it did before: one wait_get per lower rank's endpoint, and
//   Gloo's connectFullMesh traffic (each rank sets one value holding all its
//   pairs' addresses, then waits for and gets every peer's value).
// Every rank checks that it received exactly what each peer addressed to it.
// Then the control connections each rank holds at N (issue "Scale", item 4):
// a full mesh, against the tree control::control_links plans at the default
// fanout (16), on one host and on hosts of 8 ranks.
#include "control/control_links.hpp"
#include "elastic/embedded_store.hpp"
#include "elastic/store_exchange.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

using namespace troupe;
using clock_type = std::chrono::steady_clock;

namespace {

// The size of gloo::transport::tcp's pair address (sockaddr_storage and a
// sequence number).
constexpr size_t address_bytes = 136;
const std::string secret = "bootstrap-bench-secret-0123456789";

struct options {
  std::vector<int> ranks{256, 512, 1024};
  std::vector<std::string> protocols{"exchange", "per-peer"};
  std::chrono::seconds timeout{120};
  std::string json;
};

struct outcome {
  std::string protocol;
  int ranks = 0;
  double seconds = 0;
  uint64_t operations = 0; // store requests, all ranks
  uint64_t bytes_read = 0; // values received, all ranks
  std::string error;       // first failure, empty when every rank checked out
};

// What rank `from`'s pair for `to` advertises: distinct per ordered pair.
std::string address_of(int from, int to) {
  auto text = std::to_string(from) + "->" + std::to_string(to);
  text.resize(address_bytes, '.');
  return text;
}

std::string endpoint_of(int rank) {
  return "10.0.0." + std::to_string(rank % 250) + ":" + std::to_string(20000 + rank);
}

void expect(bool ok, const std::string& what) {
  if (!ok)
    throw std::runtime_error(what);
}

// One rank's bootstrap; returns its store requests and bytes read.
std::pair<uint64_t, uint64_t> run_rank(const std::string& protocol, elastic::store_client& store,
                                       int rank, int size, std::chrono::milliseconds timeout) {
  const std::string job = "bench/" + protocol + "/" + std::to_string(size);
  auto endpoint_key = [&](int r) { return job + "/endpoint/" + std::to_string(r); };
  uint64_t ops = 0, bytes = 0;
  expect(store.compare_set(endpoint_key(rank), std::nullopt, endpoint_of(rank)).swapped,
         "endpoint claimed twice");
  ++ops;
  std::vector<std::string> to_peer(size);
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank)
      to_peer[peer] = address_of(rank, peer);
  if (protocol == "exchange") {
    const auto endpoints = elastic::gather_published(store, job + "/endpoint/",
                                                     job + "/endpoints-published/", size, timeout);
    ops += 3; // add, wait, list (the last arrival's set aside)
    for (int peer = 0; peer < size; ++peer) {
      expect(endpoints[peer] == endpoint_of(peer), "wrong endpoint");
      bytes += endpoints[peer].size();
    }
    auto from_peer = elastic::all_to_all(store, job + "/gloo/", rank, size, to_peer, timeout);
    ops += 4; // set_many, add, wait, list
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank)
        continue;
      expect(from_peer[peer] == address_of(peer, rank), "wrong address from a peer");
      bytes += from_peer[peer].size();
    }
  } else {
    for (int peer = 0; peer < rank; ++peer) {
      auto value = store.wait_get(endpoint_key(peer), timeout);
      ops += 2;
      expect(value == endpoint_of(peer), "wrong endpoint");
      bytes += value.size();
    }
    std::string all;
    for (int peer = 0; peer < size; ++peer)
      all += to_peer[peer];
    store.set(job + "/gloo/" + std::to_string(rank), all);
    ++ops;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank)
        continue;
      auto value = store.wait_get(job + "/gloo/" + std::to_string(peer), timeout);
      ops += 2;
      bytes += value.size();
      // Rank `peer`'s value lists its pairs in rank order, itself skipped.
      const size_t slot = static_cast<size_t>(rank < peer ? rank : rank - 1);
      expect(value.substr(slot * address_bytes, address_bytes) == address_of(peer, rank),
             "wrong address from a peer");
    }
  }
  return {ops, bytes};
}

outcome run(const std::string& protocol, int size, std::chrono::seconds timeout) {
  elastic::store_limits limits;
  limits.max_connections = static_cast<size_t>(size) + 16;
  elastic::store_server server{"127.0.0.1", 0, secret, limits};
  outcome out;
  out.protocol = protocol;
  out.ranks = size;
  std::vector<std::unique_ptr<elastic::embedded_store_client>> clients;
  for (int r = 0; r < size; ++r)
    clients.push_back(std::make_unique<elastic::embedded_store_client>(
      "127.0.0.1", server.port(), secret, std::chrono::seconds(30)));
  std::atomic<uint64_t> ops{0}, bytes{0};
  std::atomic<bool> failed{false};
  std::string first_error;
  std::mutex error_mutex;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      ++ready;
      while (!go)
        std::this_thread::yield();
      try {
        auto [o, b] = run_rank(protocol, *clients[r], r, size, timeout);
        ops += o;
        bytes += b;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!failed.exchange(true))
          first_error = "rank " + std::to_string(r) + ": " + e.what();
      }
    });
  while (ready < size)
    std::this_thread::yield();
  const auto start = clock_type::now();
  go = true;
  for (auto& t : threads)
    t.join();
  out.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  out.operations = ops;
  out.bytes_read = bytes;
  out.error = first_error;
  return out;
}

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> out;
  std::stringstream in{text};
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(std::stoi(item));
  return out;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc)
      throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--ranks")
      o.ranks = parse_ranks(value);
    else if (flag == "--protocol")
      o.protocols = value == "both" ? o.protocols : std::vector<std::string>{value};
    else if (flag == "--timeout")
      o.timeout = std::chrono::seconds(std::stoi(value));
    else if (flag == "--json")
      o.json = value;
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  for (const auto& p : o.protocols)
    if (p != "exchange" && p != "per-peer")
      throw std::invalid_argument("--protocol is exchange, per-peer or both, not " + p);
  return o;
}

// The most control connections any rank holds: `n` ranks, fanout 16, hosts
// of `per_host` contiguous ranks.
size_t most_links(int n, int per_host) {
  std::vector<std::string> hosts;
  for (int r = 0; r < n; ++r)
    hosts.push_back("host" + std::to_string(r / per_host));
  const auto links =
    control::control_links::plan(std::vector<int32_t>(static_cast<size_t>(n), 16), hosts);
  size_t most = 0;
  for (int r = 0; r < n; ++r)
    most = std::max(most, links.neighbours(r).size());
  return most;
}

} // namespace

int main(int argc, char** argv) try {
  const auto opt = parse(argc, argv);
  // A client per simulated rank, and the server's end of each.
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  std::vector<outcome> outcomes;
  std::printf("%-9s %6s %10s %12s %14s %s\n", "protocol", "ranks", "seconds", "store ops",
              "bytes read", "check");
  for (int n : opt.ranks)
    for (const auto& p : opt.protocols) {
      auto o = run(p, n, opt.timeout);
      std::printf("%-9s %6d %10.3f %12llu %14llu %s\n", p.c_str(), n, o.seconds,
                  static_cast<unsigned long long>(o.operations),
                  static_cast<unsigned long long>(o.bytes_read),
                  o.error.empty() ? "ok" : o.error.c_str());
      std::fflush(stdout);
      outcomes.push_back(std::move(o));
    }
  struct links_row {
    int ranks;
    size_t mesh, one_host, hosts_of_8;
  };
  std::vector<links_row> links;
  std::printf("\ncontrol connections per rank (most of any rank), fanout 16\n%6s %8s %14s %16s\n",
              "ranks", "mesh", "tree, 1 host", "tree, hosts of 8");
  for (int n : opt.ranks) {
    links.push_back({n, static_cast<size_t>(n - 1), most_links(n, n), most_links(n, 8)});
    std::printf("%6d %8zu %14zu %16zu\n", n, links.back().mesh, links.back().one_host,
                links.back().hosts_of_8);
  }
  if (!opt.json.empty()) {
    std::ofstream out(opt.json);
    out << "[\n";
    for (const auto& l : links)
      out << "  {\"protocol\": \"control-connections\", \"ranks\": " << l.ranks
          << ", \"mesh\": " << l.mesh << ", \"tree_one_host\": " << l.one_host
          << ", \"tree_hosts_of_8\": " << l.hosts_of_8 << "},\n";
    for (size_t i = 0; i < outcomes.size(); ++i) {
      const auto& o = outcomes[i];
      out << "  {\"protocol\": \"" << o.protocol << "\", \"ranks\": " << o.ranks
          << ", \"seconds\": " << o.seconds << ", \"store_operations\": " << o.operations
          << ", \"bytes_read\": " << o.bytes_read << ", \"ok\": "
          << (o.error.empty() ? "true" : "false") << "}" << (i + 1 < outcomes.size() ? "," : "")
          << "\n";
    }
    out << "]\n";
  }
  return std::all_of(outcomes.begin(), outcomes.end(),
                     [](const outcome& o) { return o.error.empty(); })
           ? 0
           : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bootstrap_bench: %s\n", e.what());
  return 2;
}
