#include "error_checks.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/registry.hpp"
#include "troupe/troupe.hpp"

namespace troupe::test {

namespace {

// "rank 0 sent A, ranks 1,2 sent B": the coordinator's grouping, when rank 0
// alone sent something different from all the others.
std::string rank0_vs_rest(int size, const std::string& a, const std::string& b) {
  std::string others;
  for (int r = 1; r < size; ++r)
    others += (r > 1 ? "," : "") + std::to_string(r);
  return "rank 0 sent " + a + ", " + (size > 2 ? "ranks " : "rank ") + others + " sent " + b;
}

struct expectation {
  std::string what;
  handle h;
  status_code code;
  std::string message;
};

int verify(int rank, const std::vector<expectation>& cases) {
  int failures = 0;
  for (const auto& c : cases) {
    auto s = c.h.wait_for(std::chrono::seconds(30));
    if (s.code() != c.code || s.message() != c.message) {
      ++failures;
      std::printf("rank %d: FAIL %s: got [%s] %s\n  want [%s] %s\n", rank, c.what.c_str(),
                  to_string(s.code()), s.message().c_str(), to_string(c.code),
                  c.message.c_str());
    }
  }
  return failures;
}

} // namespace

int run_error_checks(int rank, int size) {
  const bool r0 = rank == 0;
  std::vector<float> f(12, 1.0f);
  std::vector<int32_t> i32(12, 1);
  std::vector<expectation> cases;
  auto mismatch = [&](std::string what, handle h, const std::string& name,
                      const std::string& field, const std::string& a, const std::string& b) {
    cases.push_back({std::move(what), std::move(h), status_code::mismatch,
                     "Mismatched " + field + " for tensor '" + name + "': " +
                       rank0_vs_rest(size, a, b) + "."});
  };
  const tensor f4{f.data(), data_type::float32, {4}};
  const tensor f6{f.data(), data_type::float32, {6}};
  const tensor i4{i32.data(), data_type::int32, {4}};

  mismatch("dtype", allreduce(r0 ? f4 : i4, r0 ? f4 : i4, "e.dtype"), "e.dtype", "data types",
           "float32", "int32");
  mismatch("shape", allreduce(r0 ? f4 : f6, r0 ? f4 : f6, "e.shape"), "e.shape",
           "tensor shapes", "[4]", "[6]");
  mismatch("reduce op",
           allreduce(f4, f4, "e.op", r0 ? reduce_op::sum : reduce_op::max), "e.op",
           "reduction operations", "sum", "max");
  mismatch("scale", allreduce(f4, f4, "e.scale", reduce_op::sum, r0 ? 2.0 : 1.0), "e.scale",
           "prescale and/or postscale factors", "(2, 1)", "(1, 1)");
  mismatch("operation", r0 ? allreduce(f4, f4, "e.kind") : allgather(f4, "e.kind"), "e.kind",
           "operations", "ALLREDUCE", "ALLGATHER");
  mismatch("root", broadcast(f4, r0 ? 0 : 1, "e.root"), "e.root", "root ranks", "0", "1");
  mismatch("allgather trailing",
           allgather({f.data(), data_type::float32, {2, r0 ? 3 : 2}}, "e.gather"), "e.gather",
           "trailing dimensions (all but the first)", r0 ? "[3]" : "[3]", "[2]");
  mismatch("allgather ndims",
           allgather(r0 ? tensor{f.data(), data_type::float32, {2, 2}} : f4, "e.ndims"),
           "e.ndims", "tensor ranks (number of dimensions)", "2", "1");
  mismatch("alltoall trailing",
           alltoall({f.data(), data_type::float32, {static_cast<int64_t>(size), r0 ? 2 : 1}},
                    "e.a2a"),
           "e.a2a", "trailing dimensions (all but the first)", "[2]", "[1]");

  // Errors a rank sees alone, at submission.
  auto immediate = [&](std::string what, handle h, std::string message) {
    cases.push_back({std::move(what), std::move(h), status_code::invalid_argument,
                     std::move(message)});
  };
  // Only this rank submits the first: it stays pending until shutdown.
  auto pending = allreduce(f4, f4, "e.dup." + std::to_string(rank));
  immediate("duplicate name", allreduce(f4, f4, "e.dup." + std::to_string(rank)),
            "Requested to allreduce, allgather, or broadcast a tensor with the same name as "
            "another tensor that is currently being processed. If you want to request "
            "another tensor, use a different tensor name.");
  immediate("root out of range", broadcast(f4, size, "e.badroot"),
            "broadcast of 'e.badroot': root rank " + std::to_string(size) +
              " is outside [0, " + std::to_string(size) + ")");
  immediate("scalar allgather", allgather({f.data(), data_type::float32, {}}, "e.scalar"),
            "allgather of 'e.scalar': a scalar cannot be gathered; give the tensor at least "
            "one dimension");
  immediate("splits length", alltoall(f4, "e.splits", std::vector<int64_t>(size + 1, 0)),
            "alltoall of 'e.splits': Number of entries in splits does not equal number of "
            "workers.");
  std::vector<int64_t> too_many(static_cast<size_t>(size), 0);
  too_many[0] = 5;
  immediate("splits sum", alltoall(f4, "e.splitsum", too_many),
            "alltoall of 'e.splitsum': Sum of splits entries is greater than the first "
            "dimension of tensor.");
  if (size > 1) {
    // A sum that would wrap to a negative one, and pass as a small one.
    std::vector<int64_t> wrapping(static_cast<size_t>(size), 0);
    wrapping[0] = std::numeric_limits<int64_t>::max();
    wrapping[1] = 2;
    immediate("splits wrap", alltoall(f4, "e.splitwrap", wrapping),
              "alltoall of 'e.splitwrap': Sum of splits entries is greater than the first "
              "dimension of tensor.");
  }
  immediate("indivisible", alltoall({f.data(), data_type::float32, {static_cast<int64_t>(size) + 1}}, "e.div"),
            "alltoall of 'e.div': splits not provided, but first dimension of tensor is not "
            "an even multiple of the number of workers.");
  if ((size & (size - 1)) != 0)
    immediate("adasum on a non-power-of-two set", allreduce(f4, f4, "e.adasum", reduce_op::adasum),
              "allreduce of 'e.adasum': Adasum needs a power-of-two number of ranks, not " +
                std::to_string(size));
  immediate("join's name", allreduce(f4, f4, "join.noname"),
            "allreduce of 'join.noname': that name is reserved for join()");
  immediate("adasum on integers", allreduce(i4, i4, "e.adasum_int", reduce_op::adasum),
            "allreduce of 'e.adasum_int': Adasum supports floating-point tensors, not int32");
  immediate("reducescatter op", reducescatter(f4, "e.rsop", reduce_op::max),
            "reducescatter of 'e.rsop': Reducescatter currently only supports AVERAGE and "
            "SUM.");
  immediate("reducescatter scalar", reducescatter({f.data(), data_type::float32, {}}, "e.rs0"),
            "reducescatter of 'e.rs0': Reducescatter does not support scalar inputs");

  // One bad member fails the whole group, on every rank, at submission.
  for (auto& h : grouped_allreduce({f4, {f.data(), data_type::float32, {-1}}}, {f4, f4}, "e.group"))
    immediate("group with a bad member", h,
              "group 'e.group': tensor 'e.group.1': negative dimension in shape [-1]");

  // Devices: a build without CUDA, or a process that sees no GPU (host
  // memory labelled CUDA is never handed to a GPU backend here).
  if (const auto no_gpu = backends::missing_backend(device_kind::cuda); !no_gpu.empty()) {
    const tensor cuda4{f.data(), data_type::float32, {4}, tensor_device::cuda(0)};
    immediate("CUDA tensor", allreduce(cuda4, cuda4, "e.cuda"),
              "tensor 'e.cuda' is on CUDA device 0, but " + no_gpu);
    immediate("CUDA allgather", allgather(cuda4, "e.cuda_gather"),
              "tensor 'e.cuda_gather' is on CUDA device 0, but " + no_gpu);
  }
  immediate("output on another device",
            allreduce(f4, {f.data(), data_type::float32, {4}, tensor_device::cuda(1)},
                      "e.devices"),
            "allreduce of 'e.devices': output on CUDA device 1, input on CPU; both must be on "
            "one device");
  immediate("negative device",
            broadcast({f.data(), data_type::float32, {4}, tensor_device::cuda(-1)}, 0,
                      "e.ordinal"),
            "tensor 'e.ordinal': negative device ordinal -1");

  // Output allocators: one per member of a group, or none.
  immediate("allocator count",
            grouped_allgather({f4, f4}, "e.alloc", {}, {output_allocator{}}).front(),
            "group 'e.alloc': 2 inputs but 1 output allocators");
  // Thrown on every rank: each still takes its part in the exchange (into
  // memory of the runtime's), then the collective fails with the
  // allocator's message, and the set goes on.
  cases.push_back({"allocator throws",
                   reducescatter(f4, "e.throws", reduce_op::sum, 1.0, 1.0, {},
                                 [](const shape_t&) -> void* {
                                   throw std::runtime_error("no memory for this result");
                                 }),
                   status_code::internal, "no memory for this result"});

  int failures = verify(rank, cases);

  // The runtime still serves correct collectives.
  std::vector<float> x(3, static_cast<float>(rank + 1));
  auto ok = allreduce({x.data(), data_type::float32, {3}}, {x.data(), data_type::float32, {3}},
                      "e.after");
  const float want = static_cast<float>(size * (size + 1) / 2);
  if (!ok.wait().ok() || x[0] != want) {
    ++failures;
    std::printf("rank %d: FAIL collective after the errors\n", rank);
  }
  if (failures == 0)
    std::printf("rank %d: PASS %zu error cases, then a correct allreduce\n", rank,
                cases.size());
  return failures == 0 ? 0 : 1;
}

int run_join_checks(int rank, int size) {
  const int last = size - 1;
  std::vector<std::string> problems;
  if (rank == last) {
    std::vector<float> v(4, static_cast<float>(size));
    const tensor t{v.data(), data_type::float32, {4}};
    auto s = allreduce(t, t, "j.avg", reduce_op::average).wait();
    if (!s.ok() || (size > 1 && v[0] != 1.0f))  // size / size: the others sent zeros
      problems.push_back("average with joined ranks: " + s.message() + " value " +
                         std::to_string(v[0]));
    const std::vector<std::pair<handle, std::string>> refused{
      {allgather(t, "j.gather"), "Allgather is not supported with Join at this time. Specify "
                                 "sparse_to_dense=True if using DistributedOptimizer"},
      {broadcast(t, 0, "j.bcast"), "Broadcast is not supported with Join at this time."},
      {alltoall({v.data(), data_type::float32, {static_cast<int64_t>(size)}}, "j.a2a"),
       "Alltoall is not supported with Join at this time."},
      {reducescatter(t, "j.rs"), "Reducescatter is not supported with Join at this time."},
      {barrier(), "Barrier is not supported with Join at this time."}};
    for (const auto& [h, want] : refused) {
      auto s = h.wait();
      if (size > 1 && (s.code() != status_code::mismatch || s.message() != want))
        problems.push_back("with joined ranks: [" + std::string(to_string(s.code())) + "] " +
                           s.message() + "; want " + want);
    }
  }
  auto j = join();
  if (auto s = j.wait(); !s.ok() || join_result(j) != last)
    problems.push_back("join returned " + std::to_string(join_result(j)) + ": " + s.message());
  float x = 1;
  const tensor one{&x, data_type::float32, {1}};
  if (!allreduce(one, one, "j.after").wait().ok() || x != static_cast<float>(size))
    problems.push_back("allreduce after join: " + std::to_string(x));
  // Rank 0 asks for an allreduce nobody else submits and joins; the others
  // join later, one after another: the allreduce runs with their zeros
  // before the last JOIN ends the round (it used to wait for ever).
  float y = 3;
  const tensor mine{&y, data_type::float32, {1}};
  handle pending;
  if (rank == 0)
    pending = allreduce(mine, mine, "j.pending");
  else
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + 50 * rank));
  auto again = join();
  if (auto s = again.wait_for(std::chrono::seconds(30));
      !s.ok() || join_result(again) < 0 || join_result(again) >= size)
    problems.push_back("second join: [" + std::string(to_string(s.code())) + "] " +
                       s.message());
  if (rank == 0)
    if (auto s = pending.wait_for(std::chrono::seconds(30)); !s.ok() || y != 3)
      problems.push_back("allreduce the others joined for: [" + std::string(to_string(s.code())) +
                         "] " + s.message() + " value " + std::to_string(y));
  for (const auto& p : problems)
    std::printf("rank %d: FAIL %s\n", rank, p.c_str());
  if (problems.empty())
    std::printf("rank %d: PASS join (last joined: %d)\n", rank, last);
  return problems.empty() ? 0 : 1;
}

int run_stall_checks(int rank, int size) {
  const int last = size - 1;
  std::string problem;
  float x = 1;
  const tensor t{&x, data_type::float32, {1}};
  // Rounds every rank takes part in first: the withheld round is a cache
  // hit (in a control tree, held by inner nodes until their hold).
  for (int round = 0; round < 3 && problem.empty(); ++round) {
    x = 1;
    if (!allreduce(t, t, "stall.withheld").wait().ok() || x != static_cast<float>(size))
      problem = "round " + std::to_string(round) + " before the stall: " + std::to_string(x);
  }
  x = 1;
  if (rank != last) {
    auto s = allreduce(t, t, "stall.withheld").wait_for(std::chrono::seconds(60));
    const auto want = "Tensor 'stall.withheld' stalled: ranks [" + std::to_string(last) +
                      "] did not submit it within the stall shutdown time "
                      "(TROUPE_STALL_SHUTDOWN_TIME_SECONDS). Shutting it down.";
    if (s.code() != status_code::timeout || s.message() != want)
      problem = "stalled tensor: [" + std::string(to_string(s.code())) + "] " + s.message();
  }
  if (rank == last) {
    // Join the next collective only after the others gave up on the withheld one.
    const char* shutdown_time = std::getenv("TROUPE_STALL_SHUTDOWN_TIME_SECONDS");
    std::this_thread::sleep_for(
      std::chrono::duration<double>(1.0 + (shutdown_time ? std::atof(shutdown_time) : 0.0)));
  }
  x = 1;
  if (!allreduce(t, t, "stall.after").wait().ok() || x != static_cast<float>(size))
    problem += " allreduce after the stall: " + std::to_string(x);
  if (problem.empty())
    std::printf("rank %d: PASS stalled tensor failed, runtime still serves\n", rank);
  else
    std::printf("rank %d: FAIL %s\n", rank, problem.c_str());
  return problem.empty() ? 0 : 1;
}

// Two allgathers fused in one work (a group), the second's allocator
// failing on the last rank: only that tensor fails there; the first holds
// every rank's part, there as on the peers.
int run_fused_failed_allocator_check(int rank, int size) {
  const int last = size - 1;
  std::vector<float> part(2, static_cast<float>(rank + 1));
  std::vector<std::vector<float>> gathered(2, std::vector<float>(2 * static_cast<size_t>(size)));
  const auto allocate_into = [&](size_t i, bool fails) -> output_allocator {
    return [&, i, fails](const shape_t&) -> void* { return fails ? nullptr : gathered[i].data(); };
  };
  const tensor t{part.data(), data_type::float32, {2}};
  auto handles = grouped_allgather({t, t}, "alloc.group", {},
                                   {allocate_into(0, false), allocate_into(1, rank == last)});
  std::string problem;
  for (size_t i = 0; i < 2; ++i) {
    const auto s = handles[i].wait_for(std::chrono::seconds(60));
    const bool fails = i == 1 && rank == last;
    if (fails != !s.ok() || (fails && s.message().find("alloc.group") == std::string::npos))
      problem += " tensor " + std::to_string(i) + ": [" + to_string(s.code()) + "] " + s.message();
    else if (!fails)
      for (int r = 0; r < size; ++r)
        if (gathered[i][static_cast<size_t>(2 * r)] != static_cast<float>(r + 1))
          problem += " tensor " + std::to_string(i) + " part of rank " + std::to_string(r) +
                     " holds " + std::to_string(gathered[i][static_cast<size_t>(2 * r)]);
  }
  std::printf("rank %d: %s fused allgathers, one allocator failing on rank %d\n", rank,
              problem.empty() ? "PASS" : ("FAIL" + problem + ":").c_str(), last);
  return problem.empty() ? 0 : 1;
}

int run_failed_allocator_check(int rank, int size) {
  // The last rank's allocator gives no memory for its allgather's result:
  // it fails the allgather before its peers' exchange, and must not go on
  // to pair its next collective with their pending allgather (they would
  // take its allreduce's bytes for its allgather's, and it theirs).
  const int last = size - 1;
  std::vector<float> part(4, static_cast<float>(rank + 1));
  std::vector<float> gathered(4 * static_cast<size_t>(size));
  const output_allocator allocate = [&](const shape_t&) -> void* {
    return rank == last ? nullptr : gathered.data();
  };
  // Both in flight at once, as a training step's collectives are: the
  // allreduce is agreed while the peers still run the allgather.
  std::vector<float> x(4, 1.0f);
  auto gathering = allgather({part.data(), data_type::float32, {4}}, "alloc.fails", {}, allocate);
  auto reducing = allreduce({x.data(), data_type::float32, {4}},
                            {x.data(), data_type::float32, {4}}, "alloc.after");
  const auto gather = gathering.wait_for(std::chrono::seconds(60));
  const auto reduced = reducing.wait_for(std::chrono::seconds(60));
  std::string problem;
  // It takes its part into memory of the runtime's: its peers' allgather
  // succeeds, its own fails naming the allocator, and the set goes on.
  if (rank == last && gather.message() != "the output allocator of 'alloc.fails' returned no "
                                          "memory for shape [" + std::to_string(4 * size) + "]")
    problem = "the allgather without memory gave [" + std::string(to_string(gather.code())) +
              "] " + gather.message();
  if (rank != last && !gather.ok())
    problem = "a peer's allgather failed";
  if (gather.ok())
    for (int r = 0; r < size && problem.empty(); ++r)
      for (int i = 0; i < 4; ++i)
        if (gathered[static_cast<size_t>(4 * r + i)] != static_cast<float>(r + 1))
          problem = "allgather part of rank " + std::to_string(r) + " holds " +
                    std::to_string(gathered[static_cast<size_t>(4 * r + i)]);
  if (!reduced.ok())
    problem += " the allreduce after it failed";
  else if (x != std::vector<float>(4, static_cast<float>(size)))
    problem += " the allreduce after it gave " + std::to_string(x[0]);  // another's bytes
  std::printf("rank %d: %s allgather [%s] %s; allreduce [%s] %s\n", rank,
              problem.empty() ? "PASS" : ("FAIL " + problem + ":").c_str(), to_string(gather.code()),
              gather.message().c_str(), to_string(reduced.code()), reduced.message().c_str());
  return problem.empty() ? run_fused_failed_allocator_check(rank, size) : 1;
}

int check_after_shutdown(int rank) {
  std::vector<float> x(1);
  const tensor t{x.data(), data_type::float32, {1}};
  auto s = allreduce(t, t, "late").wait();
  if (s.code() != status_code::shut_down ||
      s.message() != "Troupe has not been initialized; use troupe::init()." ||
      troupe::rank() != -1) {
    std::printf("rank %d: FAIL call after shutdown: [%s] %s\n", rank, to_string(s.code()),
                s.message().c_str());
    return 1;
  }
  std::printf("rank %d: PASS call after shutdown fails cleanly\n", rank);
  return 0;
}

} // namespace troupe::test
