#include "backends/gloo/gloo_communicator.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "backends/cpu/arith.hpp"
#include "backends/gloo/mesh_context.hpp"
#include "backends/gloo/tcp_links.hpp"
#include "backends/registry.hpp"

namespace troupe::backends {

namespace {

// Fails every pair of `context` through Gloo's own path for a timed-out
// wait (its tcp headers, which would give the pairs' methods, need a file
// Debian's libgloo-dev lacks): a receive nobody sends, waited for 1 ms,
// makes Gloo fail every pair of the context, each under the pair's lock,
// which wakes the sends and receives pending on it and takes it off Gloo's
// network thread. Once this returns no pair writes a buffer any more. Pairs
// failed before (by another caller, or by their socket's error) stay so.
void fail_pairs(gloo::Context& context) {
  char unused = 0;
  auto probe = context.createUnboundBuffer(&unused, sizeof unused);
  try {
    probe->waitRecv(std::chrono::milliseconds(1));
  } catch (const std::exception&) {
    // the timeout asked for
  }
}

// Our own slot prefixes, clear of Gloo's collectives (0x01-0x08).
constexpr uint8_t pairwise_prefix = 0x54;
constexpr uint8_t ring_prefix = 0x55;
constexpr uint8_t scatter_prefix = 0x57;
constexpr uint8_t gather_prefix = 0x58;
constexpr uint8_t chain_prefix = 0x59;

// A chain broadcast's piece: each rank passes one on while it takes the
// next.
constexpr size_t chain_segment_bytes = size_t{256} << 10;

// Up to this many members, a small broadcast (or a barrier) of a set linked
// to ring neighbours goes along the ring: n - 1 (2n - 1) hops over the
// links, against Gloo's log2(n) rounds, each of which passes Gloo's network
// thread (9 ranks: broadcast 4 B 1540 -> 1159 us, barrier 2318 -> 942 us;
// docs/benchmarks.md run (32)). Past it the rounds win: with a hop of
// about 30 us and a Gloo round of about 110 us, 16 members cost the same
// either way (450 vs 440 us), 32 members 930 vs 550 us.
constexpr int chain_max_members = 16;

// Up to this many bytes sent per rank ((members - 1) x the tensor), an
// allreduce is one exchange of whole buffers (direct_allreduce) instead of
// a ring's 2 (n - 1) exchanges of pieces: small ones cost messages'
// latency, not bandwidth. 2 ranks over loopback, through Gloo's buffers:
// 4 B 280-314 -> 227-251 us, 64 KiB 620-652 -> 328-355 us; 1 MiB whole
// was 2x slower than the ring (docs/benchmarks.md, run (23)). Up to 8
// members: each sends to all the others over tcp_links, n (n - 1)
// messages in all.
constexpr size_t direct_max_bytes = size_t{64} << 10;
constexpr int direct_max_members = 8;

// The least a step of a larger set's ring carries in a chunk (a 1 MiB
// chunk on 8 members gives 128 KiB steps).
constexpr size_t ring_step_bytes = size_t{128} << 10;

} // namespace

// Unbound buffers that abort() can wake while they are in use: registered
// from creation to destruction (after its pairs failed, no pair touches
// them any more).
class gloo_communicator::waiting {
public:
  waiting(gloo_communicator& comm, void* data, size_t bytes)
      : comm_(comm), buffer_(comm.gloo_->createUnboundBuffer(data, bytes)) {
    std::lock_guard<std::mutex> lock(comm_.mutex_);
    comm_.waiting_.push_back(buffer_.get());
    if (comm_.aborted_)
      wake(*buffer_);
  }
  ~waiting() {
    std::lock_guard<std::mutex> lock(comm_.mutex_);
    comm_.waiting_.erase(std::find(comm_.waiting_.begin(), comm_.waiting_.end(), buffer_.get()));
  }
  waiting(const waiting&) = delete;
  waiting& operator=(const waiting&) = delete;

  gloo::transport::UnboundBuffer& operator*() {
    return *buffer_;
  }
  gloo::transport::UnboundBuffer* operator->() {
    return buffer_.get();
  }

  static void wake(gloo::transport::UnboundBuffer& buffer) {
    buffer.abortWaitSend();
    buffer.abortWaitRecv();
  }

private:
  gloo_communicator& comm_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
};

gloo_communicator::gloo_communicator(backend_context ctx) : ctx_(std::move(ctx)) {
}

gloo_communicator::~gloo_communicator() = default;

// Gloo reports failures with several exception types; all mean the same to
// us: this communicator is done.
template <class F>
void gloo_communicator::guarded(const char* what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    // One pair's error (or the abort reaching the pair this thread waits
    // on) leaves the others running: they may still receive into the
    // caller's buffer, which is free to go once this returns. The links
    // close too: a neighbour waiting on them learns at once.
    if (gloo_)
      fail_pairs(*gloo_);
    if (links_)
      links_->shut(std::string("gloo ") + what + " failed: " + e.what());
    bool aborted = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      aborted = aborted_;
    }
    // What Gloo says of an abort is its timeout's text: not the cause.
    if (aborted)
      throw backend_error(std::string("gloo ") + what +
                          " was aborted: a peer of the process set was lost");
    if (dynamic_cast<const backend_error*>(&e))
      throw;
    throw backend_error(std::string("gloo ") + what + " failed: " + e.what());
  }
}

void gloo_communicator::connect() {
  guarded("rendezvous", [&] {
    // A set whose every pair is linked never uses Gloo's transport, and
    // its device's network thread wakes 100 times a second even idle
    // (epoll_wait with a 10 ms timeout, in Gloo's code): made only where
    // some messages need it.
    std::shared_ptr<gloo::Context> context;
    if (!meshed()) {
      gloo::transport::tcp::attr attr{ctx_.advertise_host.c_str()};
      context = connect_full_mesh(*ctx_.store, ctx_.store_prefix + "gloo/", ctx_.rank, ctx_.size,
                                  gloo::transport::tcp::CreateDevice(attr), ctx_.timeout);
    }
    std::unique_ptr<tcp_links> links;
    if (ctx_.size > 1)
      links = std::make_unique<tcp_links>(
        *ctx_.store, ctx_.store_prefix + "gloo-links/", ctx_.rank, ctx_.size,
        ctx_.advertise_host, ctx_.timeout,
        meshed() ? tcp_links::shape::mesh : tcp_links::shape::ring,
        ranks_have_cores(ctx_.host_ranks, ctx_.own_core));
    std::lock_guard<std::mutex> lock(mutex_);
    gloo_ = std::move(context);
    links_ = std::move(links);
    if (aborted_) {
      if (gloo_)
        fail_pairs(*gloo_);
      if (links_)
        links_->abort();
    }
  });
}

void gloo_communicator::abort() {
  std::shared_ptr<gloo::Context> context;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    context = gloo_;
  }
  if (context)
    fail_pairs(*context);
  std::lock_guard<std::mutex> lock(mutex_);
  if (links_)
    links_->abort();
  for (auto* buffer : waiting_)
    waiting::wake(*buffer);
}

size_t gloo_communicator::chunk_bytes() const {
  return meshed() ? cache_sized_chunk_bytes
                  : std::max(cache_sized_chunk_bytes,
                             ring_step_bytes * static_cast<size_t>(ctx_.size));
}

int gloo_communicator::neighbour(int offset) const {
  return ((ctx_.rank + offset) % ctx_.size + ctx_.size) % ctx_.size;
}

bool gloo_communicator::meshed() const {
  return ctx_.size <= direct_max_members;
}

bool gloo_communicator::over_links(size_t bytes) const {
  return links_ && meshed() && bytes <= direct_max_bytes;
}

bool gloo_communicator::goes_direct(const allreduce_options& opts) const {
  return over_links(opts.count * element_size(opts.dtype) * static_cast<size_t>(ctx_.size - 1));
}

void gloo_communicator::allreduce(const allreduce_options& opts) {
  ring_allreduce(opts);
}

void gloo_communicator::allgather(const allgather_options& opts) {
  guarded("allgather", [&] {
    const auto esize = element_size(opts.dtype);
    const auto n = static_cast<size_t>(ctx_.size);
    if (opts.counts.size() != n)
      throw backend_error("gloo allgather: " + std::to_string(opts.counts.size()) +
                          " parts for a set of " + std::to_string(n));
    // Part p: bytes [at[p], at[p + 1]) of the output.
    std::vector<size_t> at(n + 1, 0);
    for (size_t p = 0; p < n; ++p)
      at[p + 1] = at[p] + opts.counts[p] * esize;
    const auto bytes = [&](size_t p) { return at[p + 1] - at[p]; };
    auto* out = static_cast<char*>(opts.output);
    const auto me = static_cast<size_t>(ctx_.rank);
    if (bytes(me) > 0)
      std::memmove(out + at[me], opts.input, bytes(me));
    if (n == 1)
      return;
    if (meshed()) {
      // Every rank sends its part to every other, each at its rank's place:
      // as many bytes leave a rank as around Gloo's ring, in one step (2
      // ranks, `--shm 0`: 1 MiB parts 0.89-0.93 -> 0.59-0.67 ms, 64 MiB
      // 76-80 -> 60.5 ms, 2026-11-29).
      std::vector<link_piece> pieces(n);
      for (size_t p = 0; p < n; ++p)
        pieces[p] = {opts.input, bytes(me), out + at[p], bytes(p)};
      links_->exchange(pieces, ctx_.timeout);
      return;
    }
    // A ring, in place: at step s each rank passes on the part it took at
    // step s - 1 (its own at step 0).
    const auto chunk = [&](size_t c) { return c % n; };
    const int right = neighbour(1);
    const int left = neighbour(-1);
    for (size_t s = 0; s + 1 < n; ++s) {
      const auto give = chunk(me + n - s);
      const auto take = chunk(me + n - s - 1);
      shift(out + at[give], bytes(give), right, out + at[take], bytes(take), left,
            gloo::Slot::build(gather_prefix, static_cast<uint32_t>(s)));
    }
  });
}

void gloo_communicator::broadcast(const broadcast_options& opts) {
  if (opts.count == 0 || ctx_.size == 1)
    return;
  guarded("broadcast", [&] {
    auto* bytes = static_cast<char*>(opts.data);
    const auto n = opts.count * element_size(opts.dtype);
    if (over_links(n)) {
      // The root sends to every other rank, the others hear from it only.
      std::vector<link_piece> pieces(static_cast<size_t>(ctx_.size), no_message);
      for (int p = 0; p < ctx_.size; ++p) {
        if (ctx_.rank == opts.root)
          pieces[p] = {bytes, n, nullptr, 0, true, false};
        else if (p == opts.root)
          pieces[p] = {nullptr, 0, bytes, n, false, true};
      }
      links_->exchange(pieces, ctx_.timeout);
      return;
    }
    if (n <= direct_max_bytes && ctx_.size > chain_max_members) {
      gloo::BroadcastOptions o{gloo_};
      o.setRoot(opts.root);
      if (ctx_.rank == opts.root)
        o.setInput(bytes, n);
      o.setOutput(bytes, n);
      gloo::broadcast(o);
      return;
    }
    // A chain along the ring from the root, in segments: each rank passes
    // one on to its right while it takes the next from its left, so a large
    // tensor leaves the root once and crosses each link once.
    const int size = ctx_.size;
    const int place = (ctx_.rank - opts.root + size) % size;  // the root's 0
    const int right = place == size - 1 ? no_rank : neighbour(1);
    const int left = place == 0 ? no_rank : neighbour(-1);
    // Two ranks have nothing to pipeline: one message (16 MiB, `--shm 0`:
    // 6.9-7.0 ms in 256 KiB segments, 6.5-6.7 ms whole).
    const size_t piece = size == 2 ? n : chain_segment_bytes;
    const size_t segments = (n + piece - 1) / piece;
    const auto segment = [&](size_t k) { return bytes + k * piece; };
    const auto segment_bytes = [&](size_t k) { return std::min(piece, n - k * piece); };
    // Step k gives segment k - 1 and takes segment k; the root starts one
    // step ahead, having nothing to take.
    for (size_t k = place == 0 ? 1 : 0; k <= segments; ++k) {
      const bool gives = right != no_rank && k > 0;
      const bool takes = left != no_rank && k < segments;
      if (!gives && !takes)
        continue;
      shift(gives ? segment(k - 1) : nullptr, gives ? segment_bytes(k - 1) : 0,
            gives ? right : no_rank, takes ? segment(k) : nullptr, takes ? segment_bytes(k) : 0,
            takes ? left : no_rank, gloo::Slot::build(chain_prefix, 0));
    }
  });
}

void gloo_communicator::alltoall(const alltoall_options& opts) {
  if (opts.send_bytes.size() != static_cast<size_t>(ctx_.size) ||
      opts.recv_bytes.size() != static_cast<size_t>(ctx_.size))
    throw backend_error("gloo alltoall: " + std::to_string(opts.send_bytes.size()) + " / " +
                        std::to_string(opts.recv_bytes.size()) + " parts for a set of " +
                        std::to_string(ctx_.size));
  if (opts.send_bytes[ctx_.rank] != opts.recv_bytes[ctx_.rank])
    throw backend_error("gloo alltoall: rank " + std::to_string(ctx_.rank) + " sends itself " +
                        std::to_string(opts.send_bytes[ctx_.rank]) + " bytes but expects " +
                        std::to_string(opts.recv_bytes[ctx_.rank]));
  if (ctx_.size == 1) {
    std::memmove(opts.output, opts.input, static_cast<size_t>(opts.send_bytes[0]));
    return;
  }
  guarded("alltoall", [&] {
    if (links_ && meshed()) {
      // Every rank sends each other its part and receives its own from
      // each, the parts back to back in rank order; its own part copied
      // (2 ranks, `--shm 0`: 1 MiB 0.84-1.08 -> 0.41 ms, 64 MiB 40.5-42.6
      // -> 31.9-33.2 ms, 2026-11-29).
      const auto* in = static_cast<const char*>(opts.input);
      auto* out = static_cast<char*>(opts.output);
      std::vector<link_piece> pieces(static_cast<size_t>(ctx_.size));
      size_t from = 0, into = 0;
      for (int p = 0; p < ctx_.size; ++p) {
        const auto send = static_cast<size_t>(opts.send_bytes[p]);
        const auto recv = static_cast<size_t>(opts.recv_bytes[p]);
        if (p == ctx_.rank)
          std::memcpy(out + into, in + from, send);
        else
          pieces[p] = {in + from, send, out + into, recv};
        from += send;
        into += recv;
      }
      links_->exchange(pieces, ctx_.timeout);
      return;
    }
    gloo::AlltoallvOptions o{gloo_};
    o.setInput(static_cast<char*>(const_cast<void*>(opts.input)), opts.send_bytes);
    o.setOutput(static_cast<char*>(opts.output), opts.recv_bytes);
    gloo::alltoallv(o);
  });
}

void gloo_communicator::alltoall_rows(const void* input, const std::vector<int64_t>& send_rows,
                                      size_t row_bytes, const row_placement& place) {
  // A row of no bytes says nothing of how many came.
  if (!links_ || !meshed() || row_bytes == 0)
    return communicator::alltoall_rows(input, send_rows, row_bytes, place);
  if (send_rows.size() != static_cast<size_t>(ctx_.size))
    throw backend_error("gloo alltoall: " + std::to_string(send_rows.size()) +
                        " parts for a set of " + std::to_string(ctx_.size));
  guarded("alltoall", [&] {
    const auto n = static_cast<size_t>(ctx_.size);
    const auto me = static_cast<size_t>(ctx_.rank);
    const auto* in = static_cast<const char*>(input);
    std::vector<link_piece> pieces(n);
    std::vector<size_t> first(n + 1, 0);  // this rank's rows for member p start at first[p]
    for (size_t p = 0; p < n; ++p) {
      pieces[p].send = in + first[p] * row_bytes;
      pieces[p].send_bytes = static_cast<size_t>(send_rows[p]) * row_bytes;
      first[p + 1] = first[p] + static_cast<size_t>(send_rows[p]);
    }
    char* out = nullptr;
    size_t mine_at = 0;
    links_->exchange_sized_by_senders(pieces, ctx_.timeout, [&](const std::vector<size_t>& bytes) {
      std::vector<int64_t> recv_rows(n);
      for (size_t p = 0; p < n; ++p) {
        if (p != me && bytes[p] % row_bytes != 0)
          throw backend_error("gloo alltoall: rank " + std::to_string(p) + " sent " +
                              std::to_string(bytes[p]) + " bytes, not whole rows of " +
                              std::to_string(row_bytes));
        recv_rows[p] = p == me ? send_rows[me] : static_cast<int64_t>(bytes[p] / row_bytes);
      }
      out = static_cast<char*>(place(recv_rows));
      std::vector<void*> where(n);
      size_t at = 0;
      for (size_t p = 0; p < n; ++p) {
        if (p == me)
          mine_at = at;
        where[p] = out + at;
        at += static_cast<size_t>(recv_rows[p]) * row_bytes;
      }
      return where;
    });
    if (pieces[me].send_bytes > 0)
      std::memcpy(out + mine_at, pieces[me].send, pieces[me].send_bytes);
  });
}

void gloo_communicator::shift(const void* give, size_t give_bytes, int to, void* take,
                              size_t take_bytes, int from, uint64_t slot) {
  const bool gives = to != no_rank;
  const bool takes = from != no_rank;
  if (links_ && (!gives || links_->linked(to)) && (!takes || links_->linked(from))) {
    std::vector<link_piece> pieces(static_cast<size_t>(ctx_.size), no_message);
    if (gives)
      pieces[to] = {give, give_bytes, nullptr, 0, true, false};
    if (takes) {
      pieces[from].recv = take;
      pieces[from].recv_bytes = take_bytes;
      pieces[from].receives = true;
    }
    links_->exchange(pieces, ctx_.timeout);
    return;
  }
  if (!gloo_)  // a set of up to 8 links every pair: not reached
    throw backend_error("gloo exchange with rank " + std::to_string(gives ? to : from) +
                        ": no link to it and no Gloo transport in a set of " +
                        std::to_string(ctx_.size));
  char nothing = 0;
  waiting out{*this, give_bytes ? const_cast<void*>(give) : &nothing, give_bytes};
  waiting in{*this, take_bytes ? take : &nothing, take_bytes};
  if (gives)
    out->send(to, slot);
  if (takes)
    in->recv(from, slot);
  if ((takes && !in->waitRecv(ctx_.timeout)) || (gives && !out->waitSend(ctx_.timeout)))
    throw backend_error("gloo exchange " +
                        (gives ? "to rank " + std::to_string(to) + (takes ? " and " : "") : "") +
                        (takes ? "from rank " + std::to_string(from) : "") + " was aborted");
}

void gloo_communicator::sendrecv(const void* send, size_t send_bytes, void* recv,
                            size_t recv_bytes, int peer) {
  // Exchanges are serialised on the backend thread, so one slot is enough.
  guarded("sendrecv", [&] {
    shift(send, send_bytes, peer, recv, recv_bytes, peer, gloo::Slot::build(pairwise_prefix, 0));
  });
}

void gloo_communicator::direct_allreduce(const allreduce_options& opts) {
  const int n = ctx_.size;
  if (opts.count == 0 || n == 1)
    return;
  if (!meshed())
    return ring_allreduce(opts);
  guarded("allreduce", [&] {
    const size_t bytes = opts.count * element_size(opts.dtype);
    const auto reduce = reduction_of(opts.dtype, opts.op);
    auto* data = static_cast<char*>(opts.data);
    // Every member's buffer at its rank's place, this one's included: all
    // reduce them in rank order, so every rank holds the same bits.
    std::vector<char> all(bytes * static_cast<size_t>(n));
    std::memcpy(all.data() + bytes * static_cast<size_t>(ctx_.rank), data, bytes);
    std::vector<link_piece> pieces(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p)
      pieces[p] = {data, bytes, all.data() + bytes * static_cast<size_t>(p), bytes};
    links_->exchange(pieces, ctx_.timeout);
    reduce_in_member_order(data, opts.count, reduce, n, [&](int m) {
      return all.data() + bytes * static_cast<size_t>(m);
    });
  });
}

void gloo_communicator::ring_allreduce(const allreduce_options& opts) {
  const int n = ctx_.size;
  if (opts.count == 0 || n == 1)
    return;
  if (goes_direct(opts))
    return direct_allreduce(opts);
  guarded("allreduce", [&] {
    const size_t esize = element_size(opts.dtype);
    const auto reduce = reduction_of(opts.dtype, opts.op);
    const int right = neighbour(1);
    const int left = neighbour(-1);
    // Chunk c: elements [first(c), first(c + 1)).
    const auto first = [&](int c) { return opts.count * static_cast<size_t>(c) / n; };
    const auto chunk = [&](int c) { return ((c % n) + n) % n; };
    std::vector<char> received((first(1) + 1) * esize);
    auto* data = static_cast<char*>(opts.data);
    const auto bytes = [&](int c) { return (first(c + 1) - first(c)) * esize; };
    // One step: chunk `give` to the right, chunk `take` from the left into
    // `into`, each step under its own slot. Calls are serialised on the
    // backend thread and wait for every message, so the slots can repeat
    // from call to call.
    const auto step = [&](int s, int give, int take, char* into) {
      shift(data + first(give) * esize, bytes(give), right, into, bytes(take), left,
            gloo::Slot::build(ring_prefix, static_cast<uint32_t>(s)));
    };
    // Reduce-scatter: after it, this rank holds chunk rank + 1 whole.
    for (int s = 0; s < n - 1; ++s) {
      const int take = chunk(ctx_.rank - s - 1);
      step(s, chunk(ctx_.rank - s), take, received.data());
      char* mine = data + first(take) * esize;
      reduce(mine, mine, received.data(), first(take + 1) - first(take));
    }
    // Allgather of the reduced chunks, received in place.
    for (int s = 0; s < n - 1; ++s) {
      const int take = chunk(ctx_.rank - s);
      step(n - 1 + s, chunk(ctx_.rank - s + 1), take, data + first(take) * esize);
    }
  });
}

bool gloo_communicator::reduces_scatter(size_t) const {
  return true;
}

void gloo_communicator::reducescatter(const reducescatter_options& opts) {
  const int n = ctx_.size;
  const auto me = static_cast<size_t>(ctx_.rank);
  const size_t esize = element_size(opts.dtype);
  if (opts.counts.size() != static_cast<size_t>(n))
    throw backend_error("gloo reducescatter: " + std::to_string(opts.counts.size()) +
                        " parts for a set of " + std::to_string(n));
  // Rank c's part: elements [first[c], first[c + 1]).
  std::vector<size_t> first(opts.counts.size() + 1, 0);
  std::partial_sum(opts.counts.begin(), opts.counts.end(), first.begin() + 1);
  const auto part = [&](int c) { return opts.counts[static_cast<size_t>(c)]; };
  const size_t total = first.back();
  const size_t mine = opts.counts[me];
  auto* out = static_cast<char*>(opts.output);
  const auto* in = static_cast<const char*>(opts.input);
  if (total == 0)
    return;
  guarded("reducescatter", [&] {
    const auto reduce = reduction_of(opts.dtype, opts.op);
    if (n == 1) {
      std::memcpy(out, in, mine * esize);
    } else if (over_links(total * esize)) {
      // Every member's contribution to this rank's part at its rank's
      // place, this one's included, reduced in rank order, over the links
      // (an empty part is an empty message).
      std::vector<char> all(mine * esize * static_cast<size_t>(n));
      std::memcpy(all.data() + mine * esize * me, in + first[me] * esize, mine * esize);
      std::vector<link_piece> pieces(static_cast<size_t>(n));
      for (int p = 0; p < n; ++p)
        pieces[p] = {in + first[static_cast<size_t>(p)] * esize, part(p) * esize,
                     all.data() + mine * esize * static_cast<size_t>(p), mine * esize};
      links_->exchange(pieces, ctx_.timeout);
      if (mine > 0)
        reduce_in_member_order(out, mine, reduce, n, [&](int m) {
          return all.data() + mine * esize * static_cast<size_t>(m);
        });
    } else {
      // The ring's reduce-scatter, its chunks this call's parts and shifted
      // by one, so that rank r ends up with part r: at step s it gives the
      // part it summed at step s - 1 (its own input's at step 0) and sums
      // the part it takes with its own input's, into `sum` (its last
      // message has left: a step waits for both), the last one into the
      // output. The input is never copied or written.
      // (Buffers left uninitialised: filling megabytes first cost more than
      // the exchange; two ranks need no sum.)
      const size_t most = *std::max_element(opts.counts.begin(), opts.counts.end()) * esize;
      const std::unique_ptr<char[]> received(new char[most]);
      const std::unique_ptr<char[]> sum(new char[n > 2 ? most : 0]);
      const auto chunk = [&](int c) { return ((c % n) + n) % n; };
      const int right = neighbour(1);
      const int left = neighbour(-1);
      for (int s = 0; s < n - 1; ++s) {
        // What this rank gives is what its right neighbour takes.
        const int give = chunk(ctx_.rank - s - 1);
        const int take = chunk(ctx_.rank - s - 2);
        shift(s == 0 ? in + first[static_cast<size_t>(give)] * esize : sum.get(),
              part(give) * esize, right, received.get(), part(take) * esize, left,
              gloo::Slot::build(scatter_prefix, static_cast<uint32_t>(s + 1)));
        reduce(s == n - 2 ? out : sum.get(), in + first[static_cast<size_t>(take)] * esize,
               received.get(), part(take));
      }
    }
  });
  if (opts.finish && mine > 0)
    opts.finish(out, mine);
}

void gloo_communicator::barrier() {
  if (ctx_.size == 1)
    return;
  guarded("barrier", [&] {
    if (over_links(0)) {
      // Every rank has heard from every other.
      links_->exchange(std::vector<link_piece>(static_cast<size_t>(ctx_.size)), ctx_.timeout);
      return;
    }
    if (ctx_.size > chain_max_members) {
      gloo::BarrierOptions o{gloo_};
      gloo::barrier(o);
      return;
    }
    // Twice around the ring from rank 0: once to see every rank arrive,
    // once to let them go.
    const int right = neighbour(1);
    const int left = neighbour(-1);
    const auto slot = gloo::Slot::build(chain_prefix, 1);
    const auto pass = [&](bool takes, bool gives) {
      if (takes)
        shift(nullptr, 0, no_rank, nullptr, 0, left, slot);
      if (gives)
        shift(nullptr, 0, right, nullptr, 0, no_rank, slot);
    };
    const bool first = ctx_.rank == 0, last = ctx_.rank == ctx_.size - 1;
    pass(!first, true);     // arrived, and so did every rank before this one
    pass(true, !last);      // released (rank 0: every rank arrived)
  });
}

} // namespace troupe::backends
