// The MPI communicator's collectives past MPI's int counts, with the limit
// lowered to `limit` so that small vectors cross it. Run by mpirun on 3
// ranks: every result is checked exactly, and every MPI call the
// communicator makes is checked (through MPI's profiling interface) never
// to get a count or a displacement past the limit (nor, for
// MPI_Reduce_scatter, counts adding up past it). Exchanges go one piece
// each way at a time: blocking MPI_Sendrecv calls, no nonblocking request
// that a failed exchange could leave live.
//   mpi_count_limits LIMIT
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <mpi.h>

#include "backends/cpu/arith.hpp"
#include "backends/mpi/mpi_communicator.hpp"
#include "backends/mpi/mpi_environment.hpp"

namespace {

using namespace troupe;
using namespace troupe::backends;

int64_t limit = 0;
int me = 0;
int failed = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failed;
    std::printf("rank %d: FAIL %s\n", me, what.c_str());
  }
}

bool watching = false;  // once the communicator is connected
int alltoallv_calls = 0;
int sendrecv_calls = 0;
int nonblocking_posts = 0;  // MPI_Isend and MPI_Irecv once watching

// What an MPI call was given, against the limit.
void within(const char* call, int64_t n, const char* what) {
  if (watching)
    expect(n <= limit, std::string(call) + " got " + what + " " + std::to_string(n) +
                         " > limit " + std::to_string(limit));
}

// Every member's count or displacement in `v`.
void each_within(const char* call, const int* v, MPI_Comm comm, const char* what) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  within(call, *std::max_element(v, v + size), what);
}

} // namespace

// MPI's profiling interface: the communicator's calls come here first.
extern "C" {
int MPI_Allreduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  within("MPI_Allreduce", count, "count");
  return PMPI_Allreduce(in, out, count, type, op, comm);
}
int MPI_Reduce(const void* in, void* out, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm) {
  within("MPI_Reduce", count, "count");
  return PMPI_Reduce(in, out, count, type, op, root, comm);
}
int MPI_Reduce_scatter(const void* in, void* out, const int counts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
  // Open MPI adds the counts up in an int.
  int size = 0;
  MPI_Comm_size(comm, &size);
  within("MPI_Reduce_scatter", std::accumulate(counts, counts + size, int64_t{0}),
         "counts adding up to");
  return PMPI_Reduce_scatter(in, out, counts, type, op, comm);
}
int MPI_Allgatherv(const void* in, int count, MPI_Datatype in_type, void* out, const int counts[],
                   const int at[], MPI_Datatype out_type, MPI_Comm comm) {
  each_within("MPI_Allgatherv", counts, comm, "a count");
  each_within("MPI_Allgatherv", at, comm, "a displacement");
  return PMPI_Allgatherv(in, count, in_type, out, counts, at, out_type, comm);
}
int MPI_Bcast(void* data, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  within("MPI_Bcast", count, "count");
  return PMPI_Bcast(data, count, type, root, comm);
}
int MPI_Alltoallv(const void* in, const int counts[], const int at[], MPI_Datatype in_type,
                  void* out, const int recv_counts[], const int recv_at[], MPI_Datatype out_type,
                  MPI_Comm comm) {
  ++alltoallv_calls;
  each_within("MPI_Alltoallv", counts, comm, "a count");
  each_within("MPI_Alltoallv", at, comm, "a displacement");
  each_within("MPI_Alltoallv", recv_counts, comm, "a count");
  each_within("MPI_Alltoallv", recv_at, comm, "a displacement");
  return PMPI_Alltoallv(in, counts, at, in_type, out, recv_counts, recv_at, out_type, comm);
}
int MPI_Isend(const void* data, int count, MPI_Datatype type, int to, int tag, MPI_Comm comm,
              MPI_Request* request) {
  within("MPI_Isend", count, "count");
  nonblocking_posts += watching;
  return PMPI_Isend(data, count, type, to, tag, comm, request);
}
int MPI_Irecv(void* data, int count, MPI_Datatype type, int from, int tag, MPI_Comm comm,
              MPI_Request* request) {
  within("MPI_Irecv", count, "count");
  nonblocking_posts += watching;
  return PMPI_Irecv(data, count, type, from, tag, comm, request);
}
int MPI_Sendrecv(const void* out, int out_count, MPI_Datatype out_type, int to, int out_tag,
                 void* in, int in_count, MPI_Datatype in_type, int from, int in_tag,
                 MPI_Comm comm, MPI_Status* status) {
  within("MPI_Sendrecv", std::max(out_count, in_count), "count");
  ++sendrecv_calls;
  return PMPI_Sendrecv(out, out_count, out_type, to, out_tag, in, in_count, in_type, from, in_tag,
                       comm, status);
}
}

namespace {

int n = 1;  // ranks

// Rank r's value at i of a vector: small, so every sum is exact.
int32_t value(int r, size_t i) {
  return static_cast<int32_t>((r + 1) * 1000 + static_cast<int>(i % 997));
}

int32_t sum_at(size_t i) {
  int32_t s = 0;
  for (int r = 0; r < n; ++r)
    s += value(r, i);
  return s;
}

std::vector<int32_t> values(int r, size_t count, size_t first = 0) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = value(r, first + i);
  return v;
}

void check_allreduce(communicator& comm, size_t count) {
  auto v = values(me, count);
  comm.allreduce({v.data(), count, data_type::int32, reduce_op::sum});
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i)
    wrong += v[i] != sum_at(i);
  expect(wrong == 0, "allreduce of " + std::to_string(count) + ": " + std::to_string(wrong) +
                       " elements wrong");
}

// float16 through the library's own MPI_Op, in pieces too.
void check_half_allreduce(communicator& comm, size_t count) {
  std::vector<float> wide(count);
  for (size_t i = 0; i < count; ++i)
    wide[i] = static_cast<float>((me + 1) * static_cast<int>(i % 16));
  std::vector<uint16_t> v(count);
  float_to_half(data_type::float16, wide.data(), v.data(), count);
  comm.allreduce({v.data(), count, data_type::float16, reduce_op::sum});
  half_to_float(data_type::float16, v.data(), wide.data(), count);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i)
    wrong += wide[i] != static_cast<float>(n * (n + 1) / 2 * static_cast<int>(i % 16));
  expect(wrong == 0, "float16 allreduce of " + std::to_string(count) + ": " +
                       std::to_string(wrong) + " elements wrong");
}

void check_reducescatter(communicator& comm, const std::vector<size_t>& counts) {
  const size_t all = std::accumulate(counts.begin(), counts.end(), size_t{0});
  const size_t first = std::accumulate(counts.begin(), counts.begin() + me, size_t{0});
  const size_t mine = counts[static_cast<size_t>(me)];
  expect(comm.reduces_scatter(all), "reduces_scatter(" + std::to_string(all) + ")");
  const auto input = values(me, all);
  std::vector<int32_t> out(mine + 1, -1);
  size_t finished = 0;
  reducescatter_options o;
  o.input = input.data();
  o.output = out.data();
  o.counts = counts;
  o.dtype = data_type::int32;
  o.finish = [&](void* data, size_t count) {
    expect(data == out.data(), "reducescatter finishes its part");
    finished += count;
  };
  comm.reducescatter(o);
  size_t wrong = 0;
  for (size_t i = 0; i < mine; ++i)
    wrong += out[i] != sum_at(first + i);
  expect(wrong == 0 && out[mine] == -1 && finished == mine,
         "reducescatter of " + std::to_string(all) + ": " + std::to_string(wrong) +
           " elements wrong, finish on " + std::to_string(finished) + " of " +
           std::to_string(mine));
}

void check_allgather(communicator& comm, const std::vector<size_t>& counts) {
  const size_t all = std::accumulate(counts.begin(), counts.end(), size_t{0});
  const auto input = values(me, counts[static_cast<size_t>(me)]);
  std::vector<int32_t> out(all + 1, -1);
  comm.allgather({input.data(), out.data(), counts, data_type::int32});
  size_t wrong = 0, at = 0;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < counts[static_cast<size_t>(r)]; ++i)
      wrong += out[at++] != value(r, i);
  expect(wrong == 0 && out[all] == -1,
         "allgather of " + std::to_string(all) + ": " + std::to_string(wrong) + " elements wrong");
}

void check_broadcast(communicator& comm, size_t count, int root) {
  auto v = me == root ? values(root, count) : std::vector<int32_t>(count, -1);
  comm.broadcast({v.data(), count, data_type::int32, root});
  expect(v == values(root, count), "broadcast of " + std::to_string(count) + " from " +
                                     std::to_string(root));
}

// Rank s's rows to rank d: `rows(s, d)` of 4 bytes, values telling both.
int32_t row_value(int s, int d, int64_t k) {
  return s * 1000000 + d * 10000 + static_cast<int32_t>(k);
}

// `in_one_call`: whether the set should have taken one MPI_Alltoallv.
template <class Rows>
void check_alltoall(communicator& comm, Rows&& rows, bool rows_told, bool in_one_call,
                    const std::string& what) {
  const int calls_before = alltoallv_calls;
  std::vector<int64_t> send_rows, recv_rows;
  std::vector<int32_t> input;
  for (int d = 0; d < n; ++d) {
    send_rows.push_back(rows(me, d));
    recv_rows.push_back(rows(d, me));
    for (int64_t k = 0; k < rows(me, d); ++k)
      input.push_back(row_value(me, d, k));
  }
  const auto received = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
  std::vector<int32_t> out(static_cast<size_t>(received) + 1, -1);
  if (rows_told) {
    comm.alltoall_rows(input.data(), send_rows, sizeof(int32_t),
                       [&](const std::vector<int64_t>& told) {
                         expect(told == recv_rows, what + ": row counts");
                         return out.data();
                       });
  } else {
    alltoall_options o;
    o.input = input.data();
    o.output = out.data();
    for (int r = 0; r < n; ++r) {
      o.send_bytes.push_back(send_rows[static_cast<size_t>(r)] * 4);
      o.recv_bytes.push_back(recv_rows[static_cast<size_t>(r)] * 4);
    }
    comm.alltoall(o);
  }
  size_t wrong = 0, at = 0;
  for (int s = 0; s < n; ++s)
    for (int64_t k = 0; k < rows(s, me); ++k)
      wrong += out[at++] != row_value(s, me, k);
  expect(wrong == 0 && out.back() == -1,
         what + ": " + std::to_string(wrong) + " of " + std::to_string(received) + " rows wrong");
  expect(alltoallv_calls - calls_before == (in_one_call ? 1 : 0),
         what + ": " + std::to_string(alltoallv_calls - calls_before) + " MPI_Alltoallv calls");
}

void check_sendrecv(communicator& comm, size_t send_count, size_t recv_count) {
  if (n < 2 || me > 1)
    return;
  const int peer = 1 - me;
  const auto mine = me == 0 ? send_count : recv_count;
  const auto theirs = me == 0 ? recv_count : send_count;
  const auto input = values(me, mine);
  std::vector<int32_t> out(theirs + 1, -1);
  const int calls_before = sendrecv_calls;
  comm.sendrecv(input.data(), mine * 4, out.data(), theirs * 4, peer);
  out.pop_back();
  const auto what = "sendrecv of " + std::to_string(mine) + " and " + std::to_string(theirs);
  expect(out == values(peer, theirs), what);
  // The chunk size is over the limit here: pieces of `limit` bytes, one each
  // way per call.
  const auto piece = static_cast<size_t>(limit);
  const auto pieces = [&](size_t count) { return (count * 4 + piece - 1) / piece; };
  const auto calls = std::max(pieces(mine), pieces(theirs));
  expect(sendrecv_calls - calls_before == static_cast<int>(calls),
         what + ": " + std::to_string(sendrecv_calls - calls_before) + " MPI_Sendrecv calls, not " +
           std::to_string(calls));
}

void run_checks(communicator& comm) {
  const auto l = static_cast<size_t>(limit);
  const auto bytes = l / 4;  // int32 elements in `limit` bytes
  for (size_t count : {l, l + 1, 5 * l + 3})
    check_allreduce(comm, count);
  check_half_allreduce(comm, 3 * l + 1);
  // One call where the total fits; in pieces where only the total crosses,
  // where one part does, and with an empty part.
  check_reducescatter(comm, std::vector<size_t>(static_cast<size_t>(n), l / n));
  check_reducescatter(comm, std::vector<size_t>(static_cast<size_t>(n), l / n + 1));
  std::vector<size_t> uneven(static_cast<size_t>(n), 3);
  uneven[0] = 2 * l + 5;
  uneven.back() = 0;
  check_reducescatter(comm, uneven);
  for (size_t each : {bytes / n, bytes / n + 1, 2 * bytes + 1}) {
    check_allgather(comm, std::vector<size_t>(static_cast<size_t>(n), each));
    check_broadcast(comm, each * n, n - 1);
  }
  std::vector<size_t> one_large(static_cast<size_t>(n), 1);
  one_large[1] = 3 * bytes;
  check_allgather(comm, one_large);
  // Only the last rank has displacements past the limit (its last
  // sender's rows start past it); no rank sends that much.
  const auto rows_to_last = static_cast<int64_t>(bytes / (n - 1) + 1);
  auto only_last_crosses = [&](int, int d) { return d == n - 1 ? rows_to_last : int64_t{1}; };
  auto small = [&](int s, int d) { return int64_t{(s + d) % 2}; };
  // Over a sender's share of the limit (1/n of it), within the limit.
  auto one_pair_over_share = [&](int s, int d) {
    return s == 0 && d == 1 ? static_cast<int64_t>(bytes / 2) : int64_t{1};
  };
  auto one_pair_large = [&](int s, int d) {
    return s == 0 && d == 1 ? static_cast<int64_t>(3 * bytes) : int64_t{2};
  };
  for (bool told : {true, false}) {
    const std::string how = told ? "alltoall_rows" : "alltoall";
    check_alltoall(comm, small, told, true, how + " within the limit");
    check_alltoall(comm, one_pair_over_share, told, true, how + " over a sender's share");
    check_alltoall(comm, only_last_crosses, told, false,
                   how + " where only the last rank receives past it");
    check_alltoall(comm, one_pair_large, told, false, how + " of one pair past it");
  }
  check_sendrecv(comm, 3 * bytes + 1, 2);
  check_sendrecv(comm, 0, bytes);
  expect(nonblocking_posts == 0,
         std::to_string(nonblocking_posts) + " MPI_Isend/MPI_Irecv calls: an exchange's bytes in "
                                             "flight are not bounded by its pieces");
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2 || (limit = std::atoll(argv[1])) < 8) {
    std::fprintf(stderr, "usage: mpi_count_limits LIMIT (at least 8)\n");
    return 2;
  }
  try {
    const auto identity = mpi_world_identity(false);
    me = identity.rank;
    n = identity.size;
    if (n < 3)
      throw std::runtime_error("needs 3 ranks or more");
    backend_context ctx;
    ctx.rank = me;
    ctx.size = n;
    ctx.shared_memory = false;  // every collective over MPI
    ctx.mpi_sendrecv_chunk_bytes = limit * 2;
    mpi_communicator comm(ctx, limit);
    comm.connect();
    watching = true;
    run_checks(comm);
    comm.barrier();
  } catch (const std::exception& e) {
    std::printf("rank %d: FAIL %s\n", me, e.what());
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);  // peers may wait in a call this rank left
  }
  std::printf("rank %d: %s\n", me, failed == 0 ? "all count-limit checks passed" : "FAILED");
  return failed == 0 ? 0 : 1;
}
