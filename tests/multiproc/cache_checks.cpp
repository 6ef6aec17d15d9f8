#include "cache_checks.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "troupe/troupe.hpp"

namespace troupe::test {

namespace {

// One collective of a step: submits, and later says what went wrong ("" = ok).
struct job {
  std::string name;
  std::function<handle()> submit;
  std::function<std::string(const handle&)> verify;
};

template <class T>
std::string expect_equal(const std::string& what, const std::vector<T>& got,
                         const std::vector<T>& want) {
  if (got == want)
    return "";
  auto text = [](const std::vector<T>& v) {
    std::string out;
    for (const auto& x : v)
      out += (out.empty() ? "" : " ") + std::to_string(x);
    return "[" + out + "]";
  };
  return what + ": got " + text(got) + ", want " + text(want);
}

// expect_equal() of a result the runtime allocated (handle::output()),
// read as int32 values.
std::string expect_output(const std::string& what, const handle& h,
                          const std::vector<int32_t>& want) {
  const auto& bytes = h.output();
  std::vector<int32_t> got(bytes.size() / sizeof(int32_t));
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(got.data()));
  return expect_equal(what, got, want);
}

// Allreduce whose length changes every `period` steps; its dtype flips
// between int32 and int64 every 50 steps for `flip_dtype`.
void add_allreduce(std::vector<job>& out, int rank, int size, int step, int slot, int period,
                   bool flip_dtype) {
  const auto n = static_cast<size_t>(1 + (step / period) % 3);
  const std::string name = "grad." + std::to_string(slot);
  auto want = [=](size_t i) {
    return static_cast<int64_t>(1000 * size * (size - 1) / 2 + size * (step + slot + i));
  };
  auto mine = [=](size_t i) { return static_cast<int64_t>(1000 * rank + step + slot + i); };
  if (flip_dtype && (step / 50) % 2 == 1) {
    auto buf = std::make_shared<std::vector<int64_t>>(n);
    for (size_t i = 0; i < n; ++i)
      (*buf)[i] = mine(i);
    const tensor t{buf->data(), data_type::int64, {static_cast<int64_t>(n)}};
    out.push_back({name, [=] { return allreduce(t, t, name); }, [=](const handle&) {
                     std::vector<int64_t> w(n);
                     for (size_t i = 0; i < n; ++i)
                       w[i] = want(i);
                     return expect_equal(name + " int64", *buf, w);
                   }});
    return;
  }
  auto buf = std::make_shared<std::vector<int32_t>>(n);
  for (size_t i = 0; i < n; ++i)
    (*buf)[i] = static_cast<int32_t>(mine(i));
  const tensor t{buf->data(), data_type::int32, {static_cast<int64_t>(n)}};
  out.push_back({name, [=] { return allreduce(t, t, name); }, [=](const handle&) {
                   std::vector<int32_t> w(n);
                   for (size_t i = 0; i < n; ++i)
                     w[i] = static_cast<int32_t>(want(i));
                   return expect_equal(name + " int32", *buf, w);
                 }});
}

// Floating-point allreduce of integral values (exact in any order of
// summation), whose dtype alternates between float32 and float64.
void add_float_allreduce(std::vector<job>& out, int rank, int size, int step) {
  const std::string name = "grad.float";
  const auto n = static_cast<size_t>(1 + step % 5);
  auto value = [=](int r, size_t i) { return static_cast<double>(r * 7 + step % 97 + i); };
  auto make = [&](auto zero, data_type dtype) {
    using T = decltype(zero);
    auto buf = std::make_shared<std::vector<T>>(n);
    for (size_t i = 0; i < n; ++i)
      (*buf)[i] = static_cast<T>(value(rank, i));
    const tensor t{buf->data(), dtype, {static_cast<int64_t>(n)}};
    out.push_back({name, [=] { return allreduce(t, t, name); }, [=](const handle&) {
                     std::vector<T> want(n, 0);
                     for (int r = 0; r < size; ++r)
                       for (size_t i = 0; i < n; ++i)
                         want[i] += static_cast<T>(value(r, i));
                     return expect_equal(name, *buf, want);
                   }});
  };
  if (step % 2 == 0)
    make(float{}, data_type::float32);
  else
    make(double{}, data_type::float64);
}

// The settings one rank changes at `step` (a multiple of 10): fusion off,
// tiny and large; cycle time on and off; cache off, tiny and large; CPU
// allreduce chunks of one element, of 12 bytes (three int32, one float64),
// whole, and the configured one again: every member must cut the same
// pieces from the same list on, or the backend's calls disagree.
tuning tuning_at(int step) {
  const int k = step / 10;
  const int64_t fusion[] = {0, 48, 1 << 20, 128 << 20};
  const double cycle[] = {0, 0.2, 0, 1};
  const int64_t cache[] = {1024, 1, 0, 2, 3};
  const int64_t chunk[] = {4, 12, 0, -1};
  tuning t;
  if (k % 7 < 4)
    t.fusion_chunk_bytes = chunk[k % 4];
  if (k % 2 == 0)
    t.fusion_threshold_bytes = fusion[k % 4];
  if (k % 3 == 0)
    t.cycle_time_ms = cycle[k % 4];
  if (k % 5 != 1)
    t.cache_capacity = cache[k % 5];
  return t;
}

// An allgather of `name` in which rank r sends rows_of(r) rows of
// `columns` int32 values (r * scale + step + i), checked on every rank.
void add_gather_job(std::vector<job>& out, const std::string& name, int rank, int size, int step,
                    const std::function<int(int)>& rows_of, int columns, int scale) {
  auto buf = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(rows_of(rank) * columns));
  for (size_t i = 0; i < buf->size(); ++i)
    (*buf)[i] = rank * scale + step + static_cast<int32_t>(i);
  const tensor t{buf->data(), data_type::int32, {rows_of(rank), columns}};
  // The submit closure owns the input: nothing else keeps it alive.
  out.push_back({name, [t, name, buf] { return allgather(t, name); },
                 [=](const handle& h) {
                   std::vector<int32_t> want;
                   for (int r = 0; r < size; ++r)
                     for (int i = 0; i < rows_of(r) * columns; ++i)
                       want.push_back(r * scale + step + i);
                   return expect_output(name, h, want);
                 }});
}

// Allgather whose per-rank row count changes with the step.
void add_allgather(std::vector<job>& out, int rank, int size, int step) {
  add_gather_job(out, "gather", rank, size, step,
                 [=](int r) { return 1 + (r + step / 11) % 2; }, 2, 100);
}

// Broadcast from a root that moves every step.
void add_broadcast(std::vector<job>& out, int rank, int size, int step) {
  const int root = step % size;
  const std::string name = "weights";
  auto buf = std::make_shared<std::vector<int32_t>>(3);
  for (size_t i = 0; i < 3; ++i)
    (*buf)[i] = rank * 10 + static_cast<int32_t>(i);
  const tensor t{buf->data(), data_type::int32, {3}};
  out.push_back({name, [=] { return broadcast(t, root, name); }, [=](const handle&) {
                   return expect_equal(name, *buf, {root * 10, root * 10 + 1, root * 10 + 2});
                 }});
}

// A broadcast from rank 0 under one name every step (cached, so agreed on
// the fast lane's board); on `odd_rank` at this step the rank names root 1
// instead, which every rank must see fail, naming the tensor.
void add_stable_broadcast(std::vector<job>& out, int rank, int step, int odd_rank) {
  const std::string name = "stable.broadcast";
  const int root = rank == odd_rank ? 1 : 0;
  auto buf = std::make_shared<std::vector<int32_t>>(4);
  for (size_t i = 0; i < buf->size(); ++i)
    (*buf)[i] = rank * 10 + step + static_cast<int32_t>(i);
  const tensor t{buf->data(), data_type::int32, {4}};
  out.push_back({name, [=] { return broadcast(t, root, name); }, [=](const handle&) {
                   return expect_equal(name, *buf, {step, step + 1, step + 2, step + 3});
                 }});
  if (odd_rank >= 0)  // the handle must fail: checked in check_step
    out.back().verify = nullptr;
}

// An allgather under one name every step (cached: agreed on the board)
// whose first dimension changes every 7 steps on rank 0 alone: the others'
// requests stay the same, so they must take the new sizes from the list
// that cached it again, or their response disagrees with rank 0's.
void add_stable_allgather(std::vector<job>& out, int rank, int size, int step) {
  add_gather_job(out, "stable.gather", rank, size, step,
                 [=](int r) { return r == 0 ? 1 + (step / 7) % 3 : 2; }, 3, 1000);
}

// An alltoall under one name every step (cached: agreed on the board): rank
// r sends rank k (r + k) % 3 + 1 rows of two int32 values.
void add_stable_alltoall(std::vector<job>& out, int rank, int size, int step) {
  const std::string name = "stable.alltoall";
  const auto rows = [](int from, int to) { return (from + to) % 3 + 1; };
  auto buf = std::make_shared<std::vector<int32_t>>();
  std::vector<int64_t> splits;
  for (int to = 0; to < size; ++to) {
    splits.push_back(rows(rank, to));
    for (int i = 0; i < rows(rank, to) * 2; ++i)
      buf->push_back(rank * 1000 + to * 100 + step + i);
  }
  const tensor t{buf->data(), data_type::int32, {static_cast<int64_t>(buf->size() / 2), 2}};
  out.push_back({name, [t, name, buf, splits] { return alltoall(t, name, splits); },
                 [=](const handle& h) {
                   std::vector<int32_t> want;
                   for (int from = 0; from < size; ++from)
                     for (int i = 0; i < rows(from, rank) * 2; ++i)
                       want.push_back(from * 1000 + rank * 100 + step + i);
                   return expect_output(name, h, want);
                 }});
}

// A reducescatter under `name` every step (cached: agreed on the board) of
// `rows` rows of two int32 values (uneven shares); on `odd_rank`
// at this step the rank asks for an average instead of a sum, which every
// rank must see fail, naming the tensor.
void add_stable_reducescatter(std::vector<job>& out, const std::string& name, int rows, int rank,
                              int size, int step, int odd_rank) {
  const auto value = [=](int r, int i) { return r * 1000 + step % 89 + i; };
  auto buf = std::make_shared<std::vector<int32_t>>();
  for (int i = 0; i < rows * 2; ++i)
    buf->push_back(value(rank, i));
  const tensor t{buf->data(), data_type::int32, {rows, 2}};
  const auto op = rank == odd_rank ? reduce_op::average : reduce_op::sum;
  out.push_back({name, [t, name, buf, op] { return reducescatter(t, name, op); },
                 [=](const handle& h) {
                   int first = 0;
                   for (int r = 0; r < rank; ++r)
                     first += rows / size + (r < rows % size ? 1 : 0);
                   const int mine = rows / size + (rank < rows % size ? 1 : 0);
                   std::vector<int32_t> want;
                   for (int i = first * 2; i < (first + mine) * 2; ++i) {
                     int32_t sum = 0;
                     for (int r = 0; r < size; ++r)
                       sum += value(r, i);
                     want.push_back(sum);
                   }
                   return expect_output(name, h, want);
                 }});
  if (odd_rank >= 0)  // the handle must fail: checked in check_step
    out.back().verify = nullptr;
}

// A float32 allreduce of integral values under `name` (exact in any order
// of summation); on `odd_rank` at this step the rank sends float64
// instead, which every rank must see fail, naming the tensor.
void add_stable(std::vector<job>& out, int rank, int size, int step, int k, int odd_rank) {
  const std::string name = "stable." + std::to_string(k);
  const auto n = static_cast<size_t>(3 + k);
  auto value = [=](int r, size_t i) { return static_cast<double>(r * 5 + k + step % 89 + i); };
  const bool mismatched = odd_rank >= 0;
  if (rank == odd_rank) {
    auto buf = std::make_shared<std::vector<double>>(n);
    for (size_t i = 0; i < n; ++i)
      (*buf)[i] = value(rank, i);
    const tensor t{buf->data(), data_type::float64, {static_cast<int64_t>(n)}};
    out.push_back({name, [=] { return allreduce(t, t, name); }, nullptr});
  } else {
    auto buf = std::make_shared<std::vector<float>>(n);
    for (size_t i = 0; i < n; ++i)
      (*buf)[i] = static_cast<float>(value(rank, i));
    const tensor t{buf->data(), data_type::float32, {static_cast<int64_t>(n)}};
    out.push_back({name, [=] { return allreduce(t, t, name); }, [=](const handle&) {
                     std::vector<float> want(n, 0);
                     for (int r = 0; r < size; ++r)
                       for (size_t i = 0; i < n; ++i)
                         want[i] += static_cast<float>(value(r, i));
                     return expect_equal(name, *buf, want);
                   }});
  }
  if (mismatched)  // the handle must fail: checked in run_fast_lane_checks
    out.back().verify = nullptr;
}

} // namespace

// Submits a step's jobs and checks each: a job without `verify` must fail
// naming its tensor. False (and a FAIL line) at the first problem.
bool check_step(int rank, int step, const std::vector<job>& jobs) {
  std::vector<handle> handles;
  for (auto& j : jobs)
    handles.push_back(j.submit());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto s = handles[i].wait();
    std::string problem;
    if (!jobs[i].verify) {
      if (s.ok())
        problem = "succeeded although one rank sent another dtype or root";
      else if (s.message().find(jobs[i].name) == std::string::npos)
        problem = "failed without naming it: " + s.message();
    } else {
      problem = s.ok() ? jobs[i].verify(handles[i]) : s.message();
    }
    if (!problem.empty()) {
      std::printf("rank %d: FAIL step %d %s: %s\n", rank, step, jobs[i].name.c_str(),
                  problem.c_str());
      return false;
    }
  }
  return true;
}

int run_fast_lane_checks(int rank, int size, int steps) {
  std::mt19937 gen(7 + static_cast<unsigned>(rank));
  for (int step = 0; step < steps; ++step) {
    std::vector<job> jobs;
    // Every 50 steps one rank (a different one each time) sends a cached
    // tensor with another dtype: an error on every rank, after which the
    // tensor is negotiated and cached afresh.
    const int odd_rank = step % 50 == 25 ? (step / 50) % size : -1;
    for (int k = 0; k < 5; ++k)
      add_stable(jobs, rank, size, step, k, k == step % 5 ? odd_rank : -1);
    add_allreduce(jobs, rank, size, step, 1, 7, true);  // shape and dtype changes
    if (step % 97 == 0)  // a name seen once: evicts from a small cache
      add_allreduce(jobs, rank, size, step, 1000 + step, 1, false);
    if (step % 10 == 0)  // a broadcast whose root moves: a new request each time
      add_broadcast(jobs, rank, size, step);
    // A cached broadcast; every 50 steps one rank names another root.
    add_stable_broadcast(jobs, rank, step, step % 50 == 35 ? (step / 50) % size : -1);
    add_stable_allgather(jobs, rank, size, step);
    // A second one of its dtype: agreed lists fuse the two when both
    // complete on one rank before it writes.
    add_gather_job(jobs, "stable.gather.b", rank, size, step, [](int r) { return r + 1; }, 2,
                   10000);
    add_stable_alltoall(jobs, rank, size, step);
    // A cached reducescatter; every 50 steps one rank asks for an average.
    // A second one, fused with it alike, of fewer rows than ranks.
    add_stable_reducescatter(jobs, "stable.reducescatter", 2 * size + 1, rank, size, step,
                             step % 50 == 45 ? (step / 50) % size : -1);
    add_stable_reducescatter(jobs, "stable.reducescatter.b", size - 1, rank, size, step, -1);
    std::shuffle(jobs.begin(), jobs.end(), gen);
    if (!check_step(rank, step, jobs))
      return 1;
  }
  std::printf("rank %d: PASS %d fast-lane steps\n", rank, steps);
  return 0;
}

int run_fast_lane_lru_checks(int rank, int size, int steps) {
  for (int step = 0; step < steps; ++step) {
    std::vector<job> jobs;
    for (int k = 0; k < fast_lane_lru_stable; ++k)
      add_stable(jobs, rank, size, step, k, -1);
    add_allreduce(jobs, rank, size, step, 1000 + step, 1, false);  // a new name
    if (!check_step(rank, step, jobs))
      return 1;
  }
  std::printf("rank %d: PASS %d fast-lane steps with a new name each\n", rank, steps);
  return 0;
}

int run_cache_checks(int rank, int size, int steps, bool tune) {
  std::mt19937 gen(99 + static_cast<unsigned>(rank));
  int failures = 0;
  for (int step = 0; step < steps && failures == 0; ++step) {
    std::vector<job> jobs;
    add_allreduce(jobs, rank, size, step, 0, 1000000, false);  // never changes
    add_allreduce(jobs, rank, size, step, 1, 7, false);
    add_allreduce(jobs, rank, size, step, 2, 13, true);
    add_allgather(jobs, rank, size, step);
    add_broadcast(jobs, rank, size, step);
    if (step % 100 == 0)  // a name seen once: churns an LRU of small capacity
      add_allreduce(jobs, rank, size, step, 1000 + step, 1, false);
    if (tune)
      add_float_allreduce(jobs, rank, size, step);
    std::shuffle(jobs.begin(), jobs.end(), gen);
    if (tune && step % 10 == 0 && (step / 10) % size == rank) {
      if (auto s = troupe::tune(tuning_at(step)); !s.ok()) {
        std::printf("rank %d: FAIL tune at step %d: %s\n", rank, step, s.message().c_str());
        return 1;
      }
    }
    std::vector<handle> handles;
    for (auto& j : jobs)
      handles.push_back(j.submit());
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto s = handles[i].wait();
      auto problem = s.ok() ? jobs[i].verify(handles[i]) : s.message();
      if (!problem.empty()) {
        ++failures;
        std::printf("rank %d: FAIL step %d %s: %s\n", rank, step, jobs[i].name.c_str(),
                    problem.c_str());
      }
    }
  }
  if (failures == 0)
    std::printf("rank %d: PASS %d cached steps%s\n", rank, steps,
                tune ? ", settings changed every 10 steps" : "");
  return failures == 0 ? 0 : 1;
}

} // namespace troupe::test
