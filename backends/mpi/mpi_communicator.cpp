#include "backends/mpi/mpi_communicator.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <mpi.h>
#include <spdlog/spdlog.h>

#include "backends/cpu/arith.hpp"
#include "backends/mpi/mpi_environment.hpp"
#include "backends/shm/shm_group.hpp"
#include "ipc/shm_segment.hpp"

namespace troupe::backends {

struct mpi_communicator::comm_handle {
  MPI_Comm comm = MPI_COMM_NULL;
  // The same local rank of every host, for the shared segment's cross-host
  // step; none on a single host.
  MPI_Comm across_hosts = MPI_COMM_NULL;
};

namespace {

MPI_Datatype mpi_type(data_type dtype) {
  switch (dtype) {
    case data_type::uint8:
    case data_type::boolean: return MPI_UINT8_T;
    case data_type::int8: return MPI_INT8_T;
    case data_type::uint16: return MPI_UINT16_T;
    case data_type::int16: return MPI_INT16_T;
    case data_type::int32: return MPI_INT32_T;
    case data_type::int64: return MPI_INT64_T;
    case data_type::float32: return MPI_FLOAT;
    case data_type::float64: return MPI_DOUBLE;
    case data_type::float16:
    case data_type::bfloat16: return MPI_UINT16_T;  // reduced by half_ops()
  }
  throw backend_error(std::string("mpi: no MPI datatype for ") + to_string(dtype));
}

template <data_type D, reduce_op O>
void reduce_halves(void* in, void* inout, int* len, MPI_Datatype*) {
  half_reduction_of(D, O)(inout, in, inout, static_cast<size_t>(*len));
}

// MPI has no 16-bit float types: user ops over MPI_UINT16_T, created once
// per process (MPI frees them at MPI_Finalize).
struct half_ops {
  static constexpr reduce_op ops[] = {reduce_op::sum, reduce_op::min, reduce_op::max,
                                      reduce_op::product};
  MPI_Op f16[4];
  MPI_Op bf16[4];

  half_ops() {
    create<data_type::float16>(f16, std::make_index_sequence<4>{});
    create<data_type::bfloat16>(bf16, std::make_index_sequence<4>{});
  }

  template <data_type D, size_t... I>
  static void create(MPI_Op* out, std::index_sequence<I...>) {
    (check_mpi(MPI_Op_create(&reduce_halves<D, ops[I]>, 1, &out[I]), "MPI_Op_create"), ...);
  }

  MPI_Op of(data_type dtype, reduce_op op) const {
    const auto* table = dtype == data_type::bfloat16 ? bf16 : f16;
    for (size_t i = 0; i < 4; ++i)
      if (ops[i] == op || (op == reduce_op::average && ops[i] == reduce_op::sum))
        return table[i];
    throw backend_error(std::string("mpi: no 16-bit reduction '") + to_string(op) + "'");
  }
};

MPI_Op mpi_op(data_type dtype, reduce_op op) {
  if (is_half(dtype)) {
    static const half_ops table;
    return table.of(dtype, op);
  }
  switch (op) {
    case reduce_op::sum:
    case reduce_op::average:  // summed here, divided by the caller
      // bool is uint8 here; its sum is a logical or, as in torch.
      return dtype == data_type::boolean ? MPI_MAX : MPI_SUM;
    case reduce_op::min: return MPI_MIN;
    case reduce_op::max: return MPI_MAX;
    case reduce_op::product: return MPI_PROD;
    case reduce_op::adasum: break;
  }
  throw backend_error(std::string("mpi: reduction '") + to_string(op) + "' is not supported");
}

// Calls `call(at, n)` for the consecutive pieces [at, at + n) of `count`,
// of at most `piece` each.
template <class Call>
void in_pieces(size_t count, size_t piece, Call&& call) {
  for (size_t at = 0; at < count; at += piece)
    call(at, std::min(piece, count - at));
}

// Where each of the blocks of `sizes`, back to back, begins; then their total.
std::vector<int64_t> offsets_of(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> out{0};
  for (auto n : sizes)
    out.push_back(out.back() + n);
  return out;
}

// For a call whose counts the caller found within the limit.
std::vector<int> narrowed(const std::vector<int64_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

} // namespace

mpi_communicator::mpi_communicator(const backend_context& ctx, int64_t count_limit)
  : comm_(std::make_unique<comm_handle>()), world_ranks_(ctx.world_ranks),
    tag_(ctx.communicator_tag), sendrecv_chunk_bytes_(ctx.mpi_sendrecv_chunk_bytes),
    count_limit_(count_limit), shared_memory_(ctx.shared_memory), timeout_(ctx.timeout),
    rank_(ctx.rank), size_(ctx.size) {
}

mpi_communicator::~mpi_communicator() {
  if (group_)
    spdlog::info("troupe set rank {}/{}: shared-memory allreduce: {} allreduces, {} bytes through "
                 "segment {}",
                 rank_, size_, group_allreduces_, group_bytes_, segment_name_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  if (comm_->across_hosts != MPI_COMM_NULL)
    MPI_Comm_free(&comm_->across_hosts);
  if (comm_->comm != MPI_COMM_NULL)
    MPI_Comm_free(&comm_->comm);
}

void mpi_communicator::connect() {
  ensure_mpi_initialized();
  if (world_ranks_.empty()) {
    blocking("MPI_Comm_dup", [&] { return MPI_Comm_dup(MPI_COMM_WORLD, &comm_->comm); });
  } else {
    // Collective over the members only: other ranks need not take part.
    MPI_Group world = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, static_cast<int>(world_ranks_.size()), world_ranks_.data(), &members);
    try {
      blocking("MPI_Comm_create_group", [&] {
        return MPI_Comm_create_group(MPI_COMM_WORLD, members, tag_, &comm_->comm);
      });
    } catch (...) {
      MPI_Group_free(&members);
      MPI_Group_free(&world);
      throw;
    }
    MPI_Group_free(&members);
    MPI_Group_free(&world);
  }
  MPI_Comm_set_errhandler(comm_->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_->comm, &rank_);
  MPI_Comm_size(comm_->comm, &size_);
  if (shared_memory_)
    join_host_group();
}

void mpi_communicator::join_host_group() {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm_->comm, &rank);
  MPI_Comm_size(comm_->comm, &size);
  if (size < 2)
    return;
  MPI_Comm host = MPI_COMM_NULL;
  blocking("MPI_Comm_split_type", [&] {
    return MPI_Comm_split_type(comm_->comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
  });
  struct host_comm {
    MPI_Comm& comm;
    ~host_comm() {
      MPI_Comm_free(&comm);
    }
  } freed{host};
  int member = 0, members = 1;
  MPI_Comm_rank(host, &member);
  MPI_Comm_size(host, &members);
  // The largest and smallest number of ranks on a host, over the set: every
  // rank decides alike, as the cross-host step needs.
  int extremes[2] = {members, -members};
  blocking("allreduce", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_INT, MPI_MAX, comm_->comm);
  });
  if (extremes[0] < 2 || extremes[0] != -extremes[1]) {
    spdlog::info("troupe set rank {}/{}: shared-memory allreduce off, MPI for everything: {}",
                 rank_, size_,
                 extremes[0] < 2 ? "one rank per host"
                                 : "hosts of the set have different numbers of ranks");
    return;
  }

  // The host's first rank creates the segment and names it to the others;
  // any rank that cannot map it turns the segment off for the whole set.
  std::optional<shm_segment> segment;
  std::string problem;
  std::array<char, 256> name{};
  try {
    if (member == 0) {
      segment.emplace(shm_group::create_host_segment(members));
      segment->name().copy(name.data(), name.size() - 1);
    }
  } catch (const std::exception& e) {
    problem = e.what();
  }
  blocking("MPI_Bcast",
           [&] { return MPI_Bcast(name.data(), static_cast<int>(name.size()), MPI_CHAR, 0, host); });
  try {
    if (member > 0 && name[0] != 0)
      segment.emplace(shm_group::open_host_segment(name.data(), members));
  } catch (const std::exception& e) {
    problem = e.what();
  }
  int mapped = segment ? 1 : 0;
  blocking("allreduce", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, &mapped, 1, MPI_INT, MPI_MIN, comm_->comm);
  });
  if (!mapped) {
    spdlog::warn("troupe set rank {}/{}: shared-memory allreduce off, MPI for everything: {}",
                 rank_, size_,
                 problem.empty() ? "another rank of the set could not map its host's segment"
                                 : problem);
    return;
  }
  segment_name_ = segment->name();
  // Open MPI yields where the host's cores are oversubscribed (or the user
  // asks it to): the segment's waits then spin briefly too.
  auto group = std::make_unique<shm_group>(
    std::move(*segment), member, members, timeout_,
    mpi_yields_when_idle() ? shm_group::spin_times{} : shm_group::spin_times::polling());
  const int hosts = size / members;
  if (hosts > 1)
    blocking("MPI_Comm_split", [&] {
      return MPI_Comm_split(comm_->comm, member, rank, &comm_->across_hosts);
    });
  spdlog::info("troupe set rank {}/{}: shared-memory allreduce: local rank {} of {}, segment {}, "
               "{}",
               rank_, size_, member, members, segment_name_,
               hosts > 1 ? "cross-host step over MPI" : "no cross-host step");
  std::lock_guard<std::mutex> lock(mutex_);
  group_ = std::move(group);
  if (aborted_.load())
    group_->abort();
}

template <class Call>
void mpi_communicator::blocking(const char* what, Call&& call) {
  if (aborted_.load())
    throw backend_error(std::string("mpi: ") + what + " after the set was aborted (a peer was lost)");
  in_call_.store(what);
  calls_.fetch_add(1);
  struct leave {
    std::atomic<uint64_t>& calls;
    ~leave() {
      calls.fetch_add(1);
    }
  } left{calls_};
  check_mpi(call(), what);
}

void mpi_communicator::abort() {
  // No call starts after this; one running may still complete.
  aborted_.store(true);
  end_with_mpi_abort_at_exit();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (group_)
      group_->abort();
  }
  if (watching_.exchange(true))
    return;  // another abort already watches
  const auto deadline = std::chrono::steady_clock::now() + abort_grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (calls_.load() % 2 == 0)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (calls_.load() % 2 == 0)
    return;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  spdlog::critical("mpi: rank {}'s MPI {} is still blocked {} s after a peer was lost; MPI "
                   "cannot interrupt it, so this rank ends the job with MPI_Abort instead of "
                   "waiting for ever",
                   rank, in_call_.load(), abort_grace.count());
  spdlog::default_logger()->flush();
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void mpi_communicator::allreduce(const allreduce_options& opts) {
  if (opts.count == 0)
    return;
  if (group_) {
    allreduce_pieces(buffer_piece{opts.data, opts.count * element_size(opts.dtype)}, opts.dtype,
                     opts.op, {});
    return;
  }
  allreduce_in_pieces(opts.data, opts.count, opts.dtype, opts.op, false);
}

void mpi_communicator::allreduce_in_pieces(void* data, size_t count, data_type dtype,
                                           reduce_op op, bool across_hosts) {
  const auto type = mpi_type(dtype);
  const auto mop = mpi_op(dtype, op);
  const auto comm = across_hosts ? comm_->across_hosts : comm_->comm;
  const char* what = across_hosts ? "allreduce across hosts" : "allreduce";
  const auto esize = element_size(dtype);
  in_pieces(count, static_cast<size_t>(count_limit_), [&](size_t at, size_t n) {
    blocking(what, [&] {
      return MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * esize,
                           static_cast<int>(n), type, mop, comm);
    });
  });
}

bool mpi_communicator::reduces_pieces() const {
  return group_ != nullptr;
}

void mpi_communicator::allreduce_pieces(piece_span pieces, data_type dtype,
                                        reduce_op op, const element_finish& finish) {
  if (!group_)
    communicator::allreduce_pieces(pieces, dtype, op, finish);  // throws
  // An abort() fails the group's waits itself.
  shm_group::cross_step cross;
  if (comm_->across_hosts != MPI_COMM_NULL)
    cross = [this, dtype, op](void* data, size_t count) {
      allreduce_in_pieces(data, count, dtype, op, true);
    };
  group_->allreduce(pieces, element_size(dtype), reduction_of(dtype, op), cross, finish);
  ++group_allreduces_;
  for (const auto& p : pieces)
    group_bytes_ += p.bytes;
}

bool mpi_communicator::waits_end(const v1::Response& resp) const {
  return resp.op() == v1::OP_TYPE_ALLREDUCE && resp.reduce_op() != v1::REDUCE_OP_ADASUM &&
         segment_holds_the_set();
}

bool mpi_communicator::segment_holds_the_set() const {
  return group_ && comm_->across_hosts == MPI_COMM_NULL;
}

void mpi_communicator::reducescatter(const reducescatter_options& opts) {
  if (segment_holds_the_set()) {
    group_->reduce_scatter(opts.input, opts.output, opts.counts, element_size(opts.dtype),
                           reduction_of(opts.dtype, opts.op), opts.finish);
    return;
  }
  const std::vector<int64_t> counts(opts.counts.begin(), opts.counts.end());
  const auto at = offsets_of(counts);
  const auto type = mpi_type(opts.dtype);
  const auto op = mpi_op(opts.dtype, opts.op);
  if (at.back() <= count_limit_) {
    blocking("reducescatter", [&] {
      return MPI_Reduce_scatter(opts.input, opts.output, narrowed(counts).data(), type, op,
                                comm_->comm);
    });
  } else {
    // Every rank knows every count: all take this path.
    const auto esize = element_size(opts.dtype);
    const auto* in = static_cast<const char*>(opts.input);
    auto* out = static_cast<char*>(opts.output);
    for (int r = 0; r < size_; ++r) {
      const auto part = static_cast<size_t>(r);
      in_pieces(opts.counts[part], static_cast<size_t>(count_limit_), [&](size_t from, size_t n) {
        blocking("reducescatter", [&] {
          return MPI_Reduce(in + (static_cast<size_t>(at[part]) + from) * esize,
                            r == rank_ ? out + from * esize : nullptr, static_cast<int>(n),
                            type, op, r, comm_->comm);
        });
      });
    }
  }
  if (const size_t mine = opts.counts.at(static_cast<size_t>(rank_)); opts.finish && mine > 0)
    opts.finish(opts.output, mine);
}

template <class Send, class Recv>
void mpi_communicator::pairwise(Send&& send, Recv&& recv, const char* what) {
  for (int s = 0; s < size_; ++s) {
    const int to = (rank_ + s) % size_;
    const int from = (rank_ - s + size_) % size_;
    const auto [out, out_bytes] = send(to);
    const auto [in, in_bytes] = recv(from);
    exchange(out, out_bytes, to, in, in_bytes, from, static_cast<size_t>(count_limit_), what);
  }
}

void mpi_communicator::exchange(const char* send, size_t send_bytes, int to, char* recv,
                                size_t recv_bytes, int from, size_t piece, const char* what) {
  constexpr int tag = 0x54;
  // One blocking MPI_Sendrecv per piece, as Horovod's Adasum: at most `piece`
  // bytes each way are in flight, and no request of ours outlives a failed
  // call to write into `recv` later. Piece k this rank sends is piece k its
  // peer receives; past its end, a side's direction is MPI_PROC_NULL.
  const auto pieces = [&](size_t bytes) { return (bytes + piece - 1) / piece; };
  const size_t calls = std::max(pieces(send_bytes), pieces(recv_bytes));
  for (size_t k = 0; k < calls; ++k) {
    const size_t at = k * piece;
    const auto count = [&](size_t bytes) {
      return static_cast<int>(at < bytes ? std::min(piece, bytes - at) : 0);
    };
    const int out = count(send_bytes), in = count(recv_bytes);
    blocking(what, [&] {
      return MPI_Sendrecv(out > 0 ? send + at : send, out, MPI_BYTE, out > 0 ? to : MPI_PROC_NULL,
                          tag, in > 0 ? recv + at : recv, in, MPI_BYTE,
                          in > 0 ? from : MPI_PROC_NULL, tag, comm_->comm, MPI_STATUS_IGNORE);
    });
  }
}

void mpi_communicator::allgather(const allgather_options& opts) {
  const auto esize = static_cast<int64_t>(element_size(opts.dtype));
  std::vector<int64_t> bytes;
  for (auto c : opts.counts)
    bytes.push_back(static_cast<int64_t>(c) * esize);
  const auto at = offsets_of(bytes);
  if (at.back() <= count_limit_) {
    const auto counts = narrowed(bytes);
    blocking("allgather", [&] {
      return MPI_Allgatherv(opts.input, counts[static_cast<size_t>(rank_)], MPI_BYTE, opts.output,
                            counts.data(), narrowed(at).data(), MPI_BYTE, comm_->comm);
    });
    return;
  }
  // Every rank knows every count: all take this path.
  const auto* in = static_cast<const char*>(opts.input);
  auto* out = static_cast<char*>(opts.output);
  const auto mine = static_cast<size_t>(bytes[static_cast<size_t>(rank_)]);
  pairwise([&](int) { return std::make_pair(in, mine); },
           [&](int from) {
             const auto r = static_cast<size_t>(from);
             return std::make_pair(out + at[r], static_cast<size_t>(bytes[r]));
           },
           "allgather");
}

void mpi_communicator::broadcast(const broadcast_options& opts) {
  auto* data = static_cast<char*>(opts.data);
  in_pieces(opts.count * element_size(opts.dtype), static_cast<size_t>(count_limit_),
            [&](size_t at, size_t n) {
              blocking("broadcast", [&] {
                return MPI_Bcast(data + at, static_cast<int>(n), MPI_BYTE, opts.root,
                                 comm_->comm);
              });
            });
}

void mpi_communicator::alltoall(const alltoall_options& opts) {
  const auto sum = [](const std::vector<int64_t>& v) {
    return std::accumulate(v.begin(), v.end(), int64_t{0});
  };
  // Each total bounds its counts and displacements.
  int fits = sum(opts.send_bytes) <= count_limit_ && sum(opts.recv_bytes) <= count_limit_;
  blocking("alltoall", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, comm_->comm);
  });
  alltoall_agreed(opts, fits != 0);
}

void mpi_communicator::alltoall_rows(const void* input, const std::vector<int64_t>& send_rows,
                                     size_t row_bytes, const row_placement& place) {
  const size_t n = send_rows.size();
  const auto row = static_cast<int64_t>(row_bytes);
  // A sender that sends every member at most count_limit_ / n bytes: if
  // every sender is one, no rank's total sent or received (which bounds its
  // counts and displacements) exceeds count_limit_.
  const bool within_share = std::all_of(send_rows.begin(), send_rows.end(), [&](int64_t rows) {
    return rows * row <= count_limit_ / static_cast<int64_t>(n);
  });
  std::vector<int64_t> told, heard(2 * n);
  for (auto rows : send_rows)
    told.insert(told.end(), {rows, within_share ? 1 : 0});
  blocking("alltoall", [&] {
    return MPI_Alltoall(told.data(), 2, MPI_INT64_T, heard.data(), 2, MPI_INT64_T, comm_->comm);
  });
  std::vector<int64_t> recv_rows;
  bool all_within_share = true;
  for (size_t p = 0; p < n; ++p) {
    recv_rows.push_back(heard[2 * p]);
    all_within_share = all_within_share && heard[2 * p + 1] != 0;
  }
  const auto o = rows_exchange(input, send_rows, recv_rows, row_bytes, place);
  // Every rank heard every sender: all agree, or all ask alltoall() to.
  if (all_within_share)
    alltoall_agreed(o, true);
  else
    alltoall(o);
}

void mpi_communicator::alltoall_agreed(const alltoall_options& opts, bool in_one_call) {
  const auto send_at = offsets_of(opts.send_bytes);
  const auto recv_at = offsets_of(opts.recv_bytes);
  if (in_one_call) {
    blocking("alltoall", [&] {
      return MPI_Alltoallv(opts.input, narrowed(opts.send_bytes).data(), narrowed(send_at).data(),
                           MPI_BYTE, opts.output, narrowed(opts.recv_bytes).data(),
                           narrowed(recv_at).data(), MPI_BYTE, comm_->comm);
    });
    return;
  }
  const auto* in = static_cast<const char*>(opts.input);
  auto* out = static_cast<char*>(opts.output);
  pairwise(
    [&](int to) {
      const auto r = static_cast<size_t>(to);
      return std::make_pair(in + send_at[r], static_cast<size_t>(opts.send_bytes[r]));
    },
    [&](int from) {
      const auto r = static_cast<size_t>(from);
      return std::make_pair(out + recv_at[r], static_cast<size_t>(opts.recv_bytes[r]));
    },
    "alltoall");
}

void mpi_communicator::sendrecv(const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
                                int peer) {
  exchange(static_cast<const char*>(send), send_bytes, peer, static_cast<char*>(recv), recv_bytes,
           peer, static_cast<size_t>(std::min(sendrecv_chunk_bytes_, count_limit_)), "sendrecv");
}

void mpi_communicator::barrier() {
  blocking("barrier", [&] { return MPI_Barrier(comm_->comm); });
}

} // namespace troupe::backends
