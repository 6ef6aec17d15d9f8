#include "backends/gloo/tcp_links.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include "backends/backend.hpp"
#include "elastic/job_secret.hpp"
#include "elastic/socket_util.hpp"
#include "elastic/store_exchange.hpp"

namespace troupe::backends {

namespace net = elastic::net;

namespace {

// What a connecting rank presents: its rank, then the token the accepting
// rank sent it through the store.
constexpr size_t token_size = 64;
constexpr size_t hello_size = sizeof(uint32_t) + token_size;
// How long an accepted connection may take to present itself, and how
// many may be doing so at once.
constexpr auto hello_limit = std::chrono::seconds(1);
constexpr size_t max_strangers = 64;

// A call of messages of at most tiny_bytes (a scalar, a barrier) is all
// latency: its peer's message is usually a wake-up behind, and sleeping
// in poll() adds a wake-up of this thread (of a halted CPU, on a VM). So
// it looks again for up to tiny_spin first, on the CPU for tiny_pause,
// then yielding between looks, and only where the host's ranks have cores
// of their own: 2 ranks on 2 vCPUs, `--shm 0`, 4 B allreduce 45-50 -> 25-28
// us, 1 KiB 49-50 -> 30-31 us; but 9 ranks there, 1.0 -> 1.5 ms
// (alternating jobs, docs/benchmarks.md run (32)).
constexpr size_t tiny_bytes = 1024;
constexpr auto tiny_spin = std::chrono::microseconds(100);
constexpr auto tiny_pause = std::chrono::microseconds(20);

// Leads every message: its payload's length and its number on its link.
struct header {
  uint64_t bytes;
  uint64_t number;
};

std::string ms(std::chrono::milliseconds t) {
  return std::to_string(t.count()) + " ms";
}

// "host port token", what an accepting rank tells a connecting one.
struct address {
  std::string host;
  uint16_t port = 0;
  std::string token;

  static address parse(const std::string& text, int from) {
    if (text.empty())
      throw backend_error("tcp links: rank " + std::to_string(from) +
                          " arrived at the exchange without sending its address");
    address a;
    const auto sp1 = text.find(' ');
    const auto sp2 = text.rfind(' ');
    if (sp1 == std::string::npos || sp2 == sp1)
      throw backend_error("tcp links: rank " + std::to_string(from) +
                          " published a malformed address: '" + text + "'");
    a.host = text.substr(0, sp1);
    const auto port = text.substr(sp1 + 1, sp2 - sp1 - 1);
    unsigned long value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc{} || end != port.data() + port.size() || value == 0 || value > 65535)
      throw backend_error("tcp links: rank " + std::to_string(from) +
                          " published a malformed port: '" + port + "'");
    a.port = static_cast<uint16_t>(value);
    a.token = text.substr(sp2 + 1);
    return a;
  }
};

// The members `rank` links with: all others, or its ring neighbours.
std::vector<bool> linked_members(tcp_links::shape links, int rank, int size) {
  std::vector<bool> linked(static_cast<size_t>(size), links == tcp_links::shape::mesh);
  if (links == tcp_links::shape::ring) {
    linked[static_cast<size_t>((rank + 1) % size)] = true;
    linked[static_cast<size_t>((rank + size - 1) % size)] = true;
  }
  linked[static_cast<size_t>(rank)] = false;
  return linked;
}

// The higher rank a whole hello presents: one `rank` links with, awaits
// still (no link yet) and gave this token; -1 for anything else.
int presented(const std::string& hello, int rank, const std::vector<bool>& linked,
              const std::vector<int>& fds, const std::vector<std::string>& tokens) {
  uint32_t from = 0;
  std::memcpy(&from, hello.data(), sizeof from);
  if (from <= static_cast<uint32_t>(rank) || from >= linked.size() || !linked[from] ||
      fds[from] >= 0 || !elastic::equal_digests(hello.substr(sizeof from), tokens[from]))
    return -1;
  return static_cast<int>(from);
}

} // namespace

tcp_links::tcp_links(elastic::store_client& store, const std::string& prefix, int rank,
                     int size, const std::string& host, std::chrono::milliseconds timeout,
                     shape links, bool polls)
    : rank_(rank), size_(size), polls_(polls), fds_(static_cast<size_t>(size), -1),
      sent_(static_cast<size_t>(size), 0), received_(static_cast<size_t>(size), 0) {
  const auto deadline = net::clock::now() + timeout;
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0)
    throw backend_error("tcp links: eventfd: " + net::error_text(errno));
  try {
    const auto linked = linked_members(links, rank, size);
    // Higher ranks connect to lower ones.
    net::unique_fd listener;
    std::vector<std::string> to_peer(static_cast<size_t>(size));
    std::vector<std::string> tokens(static_cast<size_t>(size));
    int awaited = 0;
    for (int p = rank + 1; p < size; ++p)
      awaited += linked[p];
    if (awaited > 0) {
      listener = net::listen_on(host, 0);
      const auto port = std::to_string(net::local_port(listener.get()));
      for (int p = rank + 1; p < size; ++p)
        if (linked[p]) {
          tokens[p] = elastic::random_secret();
          to_peer[p] = host + " " + port + " " + tokens[p];
        }
    }
    const auto from_peer = elastic::all_to_all(
      store, prefix, rank, size, to_peer,
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - net::clock::now()));
    for (int p = 0; p < rank; ++p) {
      if (!linked[p])
        continue;
      const auto a = address::parse(from_peer[p], p);
      std::string why;
      auto fd = net::try_connect(a.host, a.port, deadline, why);
      if (!fd)
        throw backend_error("tcp links: rank " + std::to_string(rank) + " could not connect to rank " +
                            std::to_string(p) + " at " + a.host + ":" + std::to_string(a.port) +
                            ": " + why);
      std::string hello(sizeof(uint32_t), '\0');
      const auto me = static_cast<uint32_t>(rank);
      std::memcpy(hello.data(), &me, sizeof me);
      hello += a.token;
      if (const auto sent = net::send_all(fd.get(), hello, deadline); sent != net::io_result::done)
        throw backend_error("tcp links: rank " + std::to_string(p) + " did not take rank " +
                            std::to_string(rank) + "'s hello: " +
                            (sent == net::io_result::timed_out ? "not within " + ms(timeout)
                             : sent == net::io_result::closed  ? std::string("its end closed")
                                                               : net::error_text(errno)));
      fds_[p] = fd.release();
    }
    // Connections that have not presented themselves yet, each read as its
    // bytes come, for hello_limit at most: strangers holding theirs open
    // silently do not stand in front of the members (at most
    // max_strangers at once, the oldest dropped first).
    struct stranger {
      net::unique_fd fd;
      std::string hello;
      net::clock::time_point until;
    };
    std::vector<stranger> strangers;
    std::vector<pollfd> polls;
    while (awaited > 0) {
      polls.assign(1, pollfd{listener.get(), POLLIN, 0});
      auto wake = deadline;
      for (const auto& s : strangers) {
        polls.push_back({s.fd.get(), POLLIN, 0});
        wake = std::min(wake, s.until);
      }
      const int ready = ::poll(polls.data(), polls.size(), net::poll_timeout(wake));
      if (ready < 0 && errno != EINTR)
        throw backend_error("tcp links: poll: " + net::error_text(errno));
      const auto now = net::clock::now();
      if (now >= deadline)
        throw backend_error("tcp links: rank " + std::to_string(rank) + " still awaited " +
                            std::to_string(awaited) + " higher rank(s) after " + ms(timeout));
      for (size_t i = strangers.size(); i-- > 0;) {
        auto& s = strangers[i];
        bool done = now >= s.until;
        if (!done && polls[i + 1].revents != 0) {
          char bytes[hello_size];
          const auto r = ::recv(s.fd.get(), bytes, hello_size - s.hello.size(), MSG_DONTWAIT);
          if (r > 0)
            s.hello.append(bytes, static_cast<size_t>(r));
          done = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
        }
        if (!done && s.hello.size() == hello_size) {
          done = true;
          if (const int from = presented(s.hello, rank, linked, fds_, tokens); from >= 0) {
            net::set_nodelay(s.fd.get());
            fds_[from] = s.fd.release();
            --awaited;
          }
        }
        if (done)
          strangers.erase(strangers.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (!(polls[0].revents & POLLIN))
        continue;
      net::unique_fd fd{::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)};
      // This process's own errors end the setup; the others (a pending
      // connection's network errors, which accept(2) passes on) only drop
      // that connection.
      if (!fd && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM ||
                  errno == EBADF || errno == EINVAL))
        throw backend_error("tcp links: rank " + std::to_string(rank) +
                            " could not accept a link: " + net::error_text(errno));
      if (!fd)
        continue;
      if (strangers.size() == max_strangers)
        strangers.erase(strangers.begin());
      strangers.push_back({std::move(fd), {}, std::min(deadline, now + hello_limit)});
    }
  } catch (...) {
    close_all();
    throw;
  }
}

tcp_links::~tcp_links() {
  close_all();
}

void tcp_links::close_all() {
  for (int fd : fds_)
    if (fd >= 0)
      ::close(fd);
  ::close(wake_fd_);
}

void tcp_links::abort() {
  aborted_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wake_fd_, &one, sizeof one);
}

void tcp_links::shut(const std::string& why) {
  if (failure_.empty())
    failure_ = why;
  // A peer blocked on this rank's part of the stream learns at once.
  for (int fd : fds_)
    if (fd >= 0)
      ::shutdown(fd, SHUT_RDWR);
}

void tcp_links::fail(const std::string& why) {
  shut(why);
  throw backend_error(why);
}

void tcp_links::exchange(const std::vector<link_piece>& pieces, std::chrono::milliseconds timeout) {
  run(pieces, timeout, nullptr);
}

void tcp_links::exchange_sized_by_senders(const std::vector<link_piece>& pieces,
                                          std::chrono::milliseconds timeout,
                                          const placement& place) {
  run(pieces, timeout, &place);
}

void tcp_links::run(std::vector<link_piece> pieces, std::chrono::milliseconds timeout,
                    const placement* place) {
  if (!failure_.empty())
    throw backend_error("tcp links: an earlier exchange failed: " + failure_);
  if (pieces.size() != static_cast<size_t>(size_))
    throw backend_error("tcp links: " + std::to_string(pieces.size()) + " pieces for " +
                        std::to_string(size_) + " members");
  for (int m = 0; m < size_; ++m)
    if (m != rank_ && !linked(m) && (pieces[m].sends || pieces[m].receives))
      throw backend_error("tcp links: rank " + std::to_string(rank_) + " has no link to rank " +
                          std::to_string(m));
  const auto started = net::clock::now();
  // Restarted whenever bytes move, as Gloo's per-wait timeout is: one
  // large exchange (an 8-rank allgather of 1 GiB parts over 1 GbE takes a
  // minute) is not cut off while it progresses; a frozen peer moves none.
  auto deadline = started + timeout;
  const auto n = static_cast<size_t>(size_);
  // A call whose messages are at most tiny_bytes each looks again before
  // it sleeps in poll() (see tiny_spin).
  size_t largest = 0;
  for (size_t m = 0; m < n; ++m)
    largest = std::max({largest, pieces[m].send_bytes, place ? 0 : pieces[m].recv_bytes});
  const bool tiny = polls_ && largest <= tiny_bytes;
  // Per member: bytes of header + payload sent and received so far.
  std::vector<header> out(n), in(n);
  std::vector<size_t> sent(n, 0), got(n, 0);
  for (size_t m = 0; m < n; ++m)
    out[m] = {pieces[m].send_bytes, sent_[m]};
  const auto peer = [&](size_t m) { return "rank " + std::to_string(m); };
  const auto receives = [&](size_t m) {
    return static_cast<int>(m) != rank_ && pieces[m].receives;
  };
  // Sized by the senders: headers only until every one is in, then the
  // payloads where `place` says.
  size_t headers_awaited = 0;
  if (place)
    for (size_t m = 0; m < n; ++m)
      headers_awaited += receives(m);
  const auto placed = [&] {
    std::vector<size_t> bytes(n, 0);
    for (size_t m = 0; m < n; ++m)
      if (receives(m))
        bytes[m] = in[m].bytes;
    std::vector<void*> where;
    try {
      where = (*place)(bytes);
    } catch (const std::exception& e) {
      fail(std::string("tcp links: ") + e.what());
    } catch (...) {
      fail("tcp links: the placement of a sender-sized exchange failed");
    }
    if (where.size() != n)
      fail("tcp links: a placement of " + std::to_string(where.size()) + " members for " +
           std::to_string(n));
    for (size_t m = 0; m < n; ++m) {
      pieces[m].recv = where.at(m);
      pieces[m].recv_bytes = bytes[m];
    }
  };
  if (place && headers_awaited == 0)
    placed();
  std::vector<pollfd> waits;
  std::vector<size_t> waited;  // the member of each of waits but the last
  for (;;) {
    // Set when the last header came in this pass: the payloads are read
    // in the next one, before any wait.
    bool just_placed = false;
    bool moved = false;
    if (aborted_)
      fail("tcp links: aborted");
    waits.clear();
    waited.clear();
    for (size_t m = 0; m < n; ++m) {
      if (static_cast<int>(m) == rank_)
        continue;
      const size_t out_total = pieces[m].sends ? sizeof(header) + pieces[m].send_bytes : 0;
      while (sent[m] < out_total) {
        iovec iov[2];
        int count = 0;
        if (sent[m] < sizeof(header))
          iov[count++] = {reinterpret_cast<char*>(&out[m]) + sent[m], sizeof(header) - sent[m]};
        const size_t body = sent[m] > sizeof(header) ? sent[m] - sizeof(header) : 0;
        if (pieces[m].send_bytes > body)
          iov[count++] = {const_cast<char*>(static_cast<const char*>(pieces[m].send)) + body,
                          pieces[m].send_bytes - body};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<size_t>(count);
        const auto w = ::sendmsg(fds_[m], &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
          break;
        if (w < 0 && errno == EINTR)
          continue;
        if (w < 0)
          fail("tcp links: sending to " + peer(m) + " failed: " + net::error_text(errno));
        sent[m] += static_cast<size_t>(w);
        moved = true;
      }
      const bool sizing = place && headers_awaited > 0;
      const size_t in_total = !pieces[m].receives ? 0
                              : sizing            ? sizeof(header)
                                                  : sizeof(header) + pieces[m].recv_bytes;
      while (got[m] < in_total) {
        char* into = got[m] < sizeof(header)
                       ? reinterpret_cast<char*>(&in[m]) + got[m]
                       : static_cast<char*>(pieces[m].recv) + (got[m] - sizeof(header));
        const size_t want = got[m] < sizeof(header) ? sizeof(header) - got[m] : in_total - got[m];
        const auto r = ::recv(fds_[m], into, want, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
          break;
        if (r < 0 && errno == EINTR)
          continue;
        if (r == 0)
          fail("tcp links: " + peer(m) + " closed its link to rank " + std::to_string(rank_) +
               " (it failed or left) before its message " + std::to_string(received_[m]));
        if (r < 0)
          fail("tcp links: receiving from " + peer(m) + " failed: " + net::error_text(errno));
        got[m] += static_cast<size_t>(r);
        moved = true;
        if (got[m] == sizeof(header) && sizing) {
          if (in[m].number != received_[m])
            fail("tcp links: " + peer(m) + " sent its message " + std::to_string(in[m].number) +
                 " where rank " + std::to_string(rank_) + " expected message " +
                 std::to_string(received_[m]));
          if (--headers_awaited == 0) {
            placed();
            just_placed = true;
          }
        } else if (got[m] == sizeof(header) &&
                   (in[m].bytes != pieces[m].recv_bytes || in[m].number != received_[m]))
          fail("tcp links: " + peer(m) + " sent " + std::to_string(in[m].bytes) +
               " bytes as its message " + std::to_string(in[m].number) + " where rank " +
               std::to_string(rank_) + " expected " + std::to_string(pieces[m].recv_bytes) +
               " bytes as message " + std::to_string(received_[m]));
      }
      short events = 0;
      if (sent[m] < out_total)
        events |= POLLOUT;
      if (got[m] < in_total)
        events |= POLLIN;
      // A peer that failed shut its link: a rank with only a send pending
      // to it hears that as POLLRDHUP (its reads see the end of stream),
      // where POLLOUT might never come once the peer's window is full.
      if (events) {
        waits.push_back({fds_[m], static_cast<short>(events | POLLRDHUP), 0});
        waited.push_back(m);
      }
    }
    if (just_placed)
      continue;
    if (waits.empty())
      break;
    if (moved)
      deadline = net::clock::now() + timeout;
    else if (net::clock::now() >= deadline) {
      std::string missing;
      for (auto m : waited)
        missing += (missing.empty() ? "" : ", ") + peer(m);
      fail("tcp links: rank " + std::to_string(rank_) + " waited " + ms(timeout) +
           " with no byte moving for " + missing);
    }
    if (tiny) {
      const auto spent = net::clock::now() - started;
      if (spent < tiny_spin) {
        if (spent >= tiny_pause)
          std::this_thread::yield();
        continue;
      }
    }
    waits.push_back({wake_fd_, POLLIN, 0});
    const int ready = ::poll(waits.data(), waits.size(), net::poll_timeout(deadline));
    if (ready < 0 && errno != EINTR)
      fail("tcp links: poll failed: " + net::error_text(errno));
    for (size_t i = 0; ready > 0 && i < waited.size(); ++i) {
      const auto m = waited[i];
      // With a read pending, the next pass reads what is left, then the
      // end of the stream, and says so.
      if ((waits[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) && !(waits[i].events & POLLIN))
        fail("tcp links: " + peer(m) + " closed its link to rank " + std::to_string(rank_) +
             " (it failed or left) before taking its message " + std::to_string(sent_[m]));
    }
  }
  for (size_t m = 0; m < n; ++m) {
    sent_[m] += pieces[m].sends;
    received_[m] += pieces[m].receives;
  }
}

} // namespace troupe::backends
