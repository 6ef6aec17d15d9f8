#include "elastic/embedded_store.hpp"

#include "elastic/job_secret.hpp"
#include "elastic/socket_util.hpp"
#include "elastic/store_protocol.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <map>
#include <thread>
#include <poll.h>
#include <sys/eventfd.h>
#include <set>
#include <sys/socket.h>
#include <unistd.h>

namespace troupe::elastic {

namespace {

using net::clock;
namespace proto = protocol;

// What every authenticated connection may buffer each way without drawing
// on the server's budgets: a few ordinary requests or replies.
constexpr size_t allowance = 64 << 10;

constexpr size_t largest_frame = proto::header_size + proto::tag_size + proto::max_body_size;

struct pending_wait {
  std::vector<std::string> keys;
  clock::time_point deadline;
};

struct connection {
  net::unique_fd fd;
  proto::session_keys keys;
  bool authenticated = false;
  clock::time_point accepted;
  uint64_t requests_read = 0;
  uint64_t replies_sent = 0;
  std::string in;
  std::string out;
  // Input budget held for the large frame at the front of `in`.
  size_t reserved = 0;
  // When `out` last shrank (or became non-empty): a reader stuck past the
  // slow-reader timeout is dropped.
  clock::time_point out_moved;
  // While set, later frames of this client stay buffered so that replies
  // keep request order.
  std::optional<pending_wait> wait;
  bool closed = false;
};

// A stored value; a leased one disappears at `expires` unless renewed.
struct entry {
  std::string value;
  std::optional<clock::time_point> expires;
};

using entries = std::map<std::string, entry>;

proto::frame_writer begin_reply(proto::status st) {
  proto::frame_writer out;
  out.u8(static_cast<uint8_t>(st));
  return out;
}

std::string reply(proto::status st) {
  return begin_reply(st).finish();
}

std::string reply(proto::status st, std::string_view payload) {
  return begin_reply(st).bytes(payload).finish();
}

void warn_on_stderr(const std::string& text) {
  std::fprintf(stderr, "troupe-run: warning: %s\n", text.c_str());
}

} // namespace

struct store_server::impl {
  std::string key; // derived from the job's secret
  store_limits limits;
  std::string where; // host:port, for warnings
  store_server::warning_sink warn;
  size_t reserved_input = 0; // sum of connections' `reserved`
  size_t pending_output = 0; // sum of connections' `out`
  net::unique_fd listener;
  net::unique_fd wake; // eventfd: the destructor's stop signal
  entries data; // ordered, so that a prefix listing is a range
  // Leased keys by expiry time: the first is the next to go.
  std::set<std::pair<clock::time_point, std::string>> leases;
  std::map<int, connection> conns;
  bool store_changed = false;
  // Out of file descriptors: the listener stays readable, so it is left out
  // of poll() until a client leaves, or for accept_retry (descriptors this
  // process freed elsewhere), instead of spinning on accept().
  bool accept_paused = false;
  clock::time_point accept_paused_at{};
  static constexpr auto accept_retry = std::chrono::milliseconds(100);
  // Budget freed after some connection was looked at in this round: the
  // next poll() returns at once, so a connection waiting for it goes on.
  bool budget_freed = false;
  // Connections closed at limits.max_connections, not yet warned about: a
  // burst of them makes one warning, not one each.
  size_t refused_unwarned = 0;
  std::optional<clock::time_point> refusal_warned_at;
  std::thread thread;

  void run();
  void accept_all();
  void refuse(int fd);
  void warn_of_refusals(clock::time_point now);
  void read_from(connection& c);
  size_t read_limit(const connection& c) const;
  void process_input(connection& c);
  bool may_serve(const connection& c) const;
  void reserve_input(connection& c);
  void answer(connection& c, const std::string& frame);
  void release(connection& c);
  void drop_stale(clock::time_point now);
  void handle(connection& c, proto::request& req);
  void handle_add(connection& c, const proto::request& req);
  void handle_compare_set(connection& c, proto::request& req);
  void handle_list(connection& c, const proto::request& req);
  void handle_lease(connection& c, proto::request& req);
  entries::iterator write(const std::string& key, std::string value);
  void set_lease(entries::iterator it,
                 std::optional<clock::time_point> expires);
  void expire_leases();
  void erase(entries::iterator it);
  bool has_all(const std::vector<std::string>& keys) const;
  void settle_waits();
  void flush(connection& c);
  int next_timeout() const;
};

store_server::store_server(const std::string& bind_host, uint16_t port,
                           const std::string& secret, store_limits limits,
                           warning_sink warn)
  : impl_(std::make_unique<impl>()) {
  if (secret.size() < min_secret_size)
    throw store_error("store: the job's secret is " + std::to_string(secret.size()) +
                      " bytes long; it needs at least " + std::to_string(min_secret_size));
  if (limits.input_budget < largest_frame)
    throw store_error("store: an input budget of " + std::to_string(limits.input_budget) +
                      " bytes cannot hold one largest frame");
  impl_->key = derive_key(secret, "store");
  impl_->limits = limits;
  try {
    impl_->listener = net::listen_on(bind_host, port);
  } catch (const std::runtime_error& e) {
    throw store_error(std::string("store: ") + e.what());
  }
  port_ = net::local_port(impl_->listener.get());
  impl_->where = bind_host + ":" + std::to_string(port_);
  impl_->warn = warn ? std::move(warn) : warn_on_stderr;
  impl_->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->wake)
    throw store_error("store: eventfd: " + net::error_text(errno));
  impl_->thread = std::thread([this] { impl_->run(); });
}

store_server::~store_server() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(impl_->wake.get(), &one, sizeof(one));
  impl_->thread.join();
}

void store_server::impl::run() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake.get(), POLLIN, 0});
    short accept_events = accept_paused ? 0 : POLLIN;
    fds.push_back({listener.get(), accept_events, 0});
    for (auto& [fd, c] : conns) {
      // Input is read even during a wait so that a hang-up is noticed.
      short events = c.in.size() < read_limit(c) ? POLLIN : 0;
      if (!c.out.empty())
        events |= POLLOUT;
      fds.push_back({fd, events, 0});
    }
    int n = ::poll(fds.data(), fds.size(), budget_freed ? 0 : next_timeout());
    budget_freed = false;
    const size_t reserved_before = reserved_input, output_before = pending_output;
    if (n < 0 && errno != EINTR) {
      // Cannot serve any more: hang up so that clients fail now rather than
      // at their deadlines.
      conns.clear();
      listener.reset();
      return;
    }
    if (fds[0].revents != 0)
      return;
    expire_leases();
    if (accept_paused && clock::now() >= accept_paused_at + accept_retry)
      accept_paused = false;  // polled for again from the next round
    if (fds[1].revents & POLLIN)
      accept_all();
    warn_of_refusals(clock::now());
    for (size_t i = 2; i < fds.size(); ++i) {
      auto it = conns.find(fds[i].fd);
      if (it != conns.end() && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        read_from(it->second);
    }
    // Every connection, not only those with events: freed budget lets a
    // waiting one go on.
    for (auto& [fd, c] : conns)
      if (!c.closed)
        process_input(c);
    settle_waits();
    drop_stale(clock::now());
    for (auto it = conns.begin(); it != conns.end();) {
      if (!it->second.closed)
        flush(it->second);
      if (it->second.closed) {
        release(it->second);
        it = conns.erase(it);
        accept_paused = false;
      } else {
        ++it;
      }
    }
    budget_freed = reserved_input < reserved_before || pending_output < output_before;
  }
}

void store_server::impl::accept_all() {
  for (;;) {
    int fd = ::accept4(listener.get(), nullptr, nullptr,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      accept_paused = errno == EMFILE || errno == ENFILE;
      accept_paused_at = clock::now();
      return;
    }
    if (conns.size() >= limits.max_connections) {
      refuse(fd);
      continue;
    }
    net::set_nodelay(fd);
    auto& c = conns[fd];
    c.fd.reset(fd);
    c.keys = {key, proto::random_nonce()};
    c.accepted = clock::now();
    c.out = proto::encode_greeting(c.keys.nonce);
    c.out_moved = c.accepted;
    pending_output += c.out.size();
  }
}

void store_server::impl::refuse(int fd) {
  // Warned before the close: once the client sees its connection end, the
  // operator can read why.
  ++refused_unwarned;
  warn_of_refusals(clock::now());
  ::close(fd);
}

void store_server::impl::warn_of_refusals(clock::time_point now) {
  if (refused_unwarned == 0 ||
      (refusal_warned_at && now < *refusal_warned_at + limits.refusal_warning_interval))
    return;
  const auto what = refusal_warned_at ? "closed " + std::to_string(refused_unwarned) +
                                         " more new connection(s) since its last warning"
                                     : std::string("closed a new connection");
  warn("the rendezvous store at " + where + " " + what + ": it serves at most " +
       std::to_string(limits.max_connections) +
       " connections at once (store_limits::max_connections), which troupe-run sizes from "
       "the job's ranks (--max-np in an elastic job) or, in an elastic job without --max-np, "
       "from the open-file limit: a larger --max-np or ulimit -n raises it");
  refusal_warned_at = now;
  refused_unwarned = 0;
}

size_t store_server::impl::read_limit(const connection& c) const {
  return c.authenticated ? allowance + c.reserved : proto::hello_frame_size;
}

bool store_server::impl::may_serve(const connection& c) const {
  return !c.closed && !c.wait && c.out.size() < allowance &&
         pending_output < limits.output_budget;
}

void store_server::impl::reserve_input(connection& c) {
  const size_t frame =
    c.in.size() < proto::header_size ? 0 : proto::header_size + proto::body_size(c.in);
  if (!c.authenticated && frame > proto::hello_frame_size)
    throw proto::protocol_error("the first request must be hello, authenticated with the "
                                "job's secret");
  const size_t want = frame > allowance ? frame : 0;
  if (want == c.reserved)
    return;
  reserved_input -= c.reserved;
  c.reserved = 0;
  if (want != 0 && reserved_input + want <= limits.input_budget) {
    c.reserved = want;
    reserved_input += want;
    c.in.reserve(want); // one allocation of the announced size, no doubling
  }
}

void store_server::impl::answer(connection& c, const std::string& frame) {
  auto sealed = proto::seal(frame, c.keys, proto::direction::reply, c.replies_sent++);
  if (c.out.empty())
    c.out_moved = clock::now();
  pending_output += sealed.size();
  c.out.append(sealed);
}

void store_server::impl::release(connection& c) {
  reserved_input -= c.reserved;
  pending_output -= c.out.size();
  c.reserved = 0;
  c.out.clear();
}

void store_server::impl::drop_stale(clock::time_point now) {
  for (auto& [fd, c] : conns) {
    if (!c.authenticated && now - c.accepted >= limits.hello_timeout)
      c.closed = true;
    if (!c.out.empty() && now - c.out_moved >= limits.slow_reader_timeout)
      c.closed = true;
  }
}

void store_server::impl::read_from(connection& c) {
  char buf[65536];
  for (size_t limit = read_limit(c); c.in.size() < limit;) {
    auto n = ::recv(c.fd.get(), buf, std::min(sizeof(buf), limit - c.in.size()), 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
      c.closed = true;
    return;
  }
}

void store_server::impl::process_input(connection& c) {
  size_t used = 0;
  try {
    while (may_serve(c)) {
      auto rest = std::string_view{c.in}.substr(used);
      auto size = proto::frame_size(rest);
      if (size == 0 || (!c.authenticated && size > proto::hello_frame_size))
        break; // incomplete; an oversized first frame is refused below
      auto message = proto::unseal(rest.substr(proto::header_size, size - proto::header_size),
                                   c.keys, proto::direction::request, c.requests_read++);
      auto req = proto::decode_request(message);
      used += size;
      if (c.authenticated) {
        handle(c, req);
      } else if (req.kind == proto::op::hello) {
        c.authenticated = true;
        c.keys.nonce += req.value;  // both nonces from the hello's reply on
        answer(c, reply(proto::status::ok));
      } else {
        throw proto::protocol_error("the first request must be hello");
      }
    }
    c.in.erase(0, used);
    reserve_input(c);
  } catch (const proto::protocol_error& e) {
    // A client that breaks the framing or the authentication cannot be
    // resynchronised: it is told why (best effort), then hung up on.
    c.in.clear();
    answer(c, reply(proto::status::error, std::string("malformed request: ") + e.what()));
    flush(c);
    c.closed = true;
  }
}

void store_server::impl::handle(connection& c, proto::request& req) {
  switch (req.kind) {
    case proto::op::set:
      set_lease(write(req.key, std::move(req.value)), std::nullopt);
      answer(c, reply(proto::status::ok));
      break;
    case proto::op::set_many:
      for (size_t i = 0; i < req.keys.size(); ++i)
        set_lease(write(req.keys[i], std::move(req.values[i])), std::nullopt);
      answer(c, reply(proto::status::ok));
      break;
    case proto::op::get:
      if (auto it = data.find(req.key); it != data.end())
        answer(c, reply(proto::status::ok, it->second.value));
      else
        answer(c, reply(proto::status::missing));
      break;
    case proto::op::add:
      handle_add(c, req);
      break;
    case proto::op::wait:
      if (has_all(req.keys))
        answer(c, reply(proto::status::ok));
      else if (req.timeout_ms <= 0)
        answer(c, reply(proto::status::timed_out));
      else
        c.wait = pending_wait{std::move(req.keys),
                              clock::now()
                                + std::chrono::milliseconds(std::min(
                                  req.timeout_ms, proto::max_timeout_ms))};
      break;
    case proto::op::remove:
      if (auto it = data.find(req.key); it != data.end()) {
        erase(it);
        answer(c, reply(proto::status::ok));
      } else {
        answer(c, reply(proto::status::missing));
      }
      break;
    case proto::op::compare_set:
      handle_compare_set(c, req);
      break;
    case proto::op::list:
      handle_list(c, req);
      break;
    case proto::op::set_with_lease:
    case proto::op::renew:
      handle_lease(c, req);
      break;
    case proto::op::hello:
      throw proto::protocol_error("hello sent twice");
  }
}

void store_server::impl::handle_add(connection& c, const proto::request& req) {
  // Counters are stored as decimal text, so get() of a counter reads "3".
  int64_t value = 0;
  if (auto it = data.find(req.key); it != data.end()) {
    const auto& text = it->second.value;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(),
                                     value);
    if (ec != std::errc{} || end != text.data() + text.size()) {
      answer(c, reply(proto::status::error,
                      "value of key '" + req.key + "' is not an integer"));
      return;
    }
  }
  if (__builtin_add_overflow(value, req.delta, &value)) {
    answer(c, reply(proto::status::error, "adding " + std::to_string(req.delta) + " to key '" +
                                            req.key + "' overflows 64 bits"));
    return;
  }
  write(req.key, std::to_string(value));
  answer(c, begin_reply(proto::status::ok).i64(value).finish());
}

void store_server::impl::handle_compare_set(connection& c,
                                            proto::request& req) {
  auto it = data.find(req.key);
  std::optional<std::string> current;
  if (it != data.end())
    current = it->second.value;
  // Equal optionals: both absent, or both present with equal bytes.
  bool swapped = current == req.expected;
  if (swapped) {
    current = req.value;
    write(req.key, std::move(req.value));
  }
  answer(c, begin_reply(proto::status::ok)
              .flag(swapped)
              .optional_bytes(current)
              .finish());
}

void store_server::impl::handle_list(connection& c,
                                     const proto::request& req) {
  const auto& prefix = req.key;
  auto first = data.lower_bound(prefix);
  auto last = first;
  uint32_t count = 0;
  while (last != data.end()
         && last->first.compare(0, prefix.size(), prefix) == 0) {
    ++last;
    ++count;
  }
  auto out = begin_reply(proto::status::ok);
  out.u32(count);
  for (auto it = first; it != last; ++it) {
    out.bytes(it->first);
    if (req.with_values)
      out.bytes(it->second.value);
  }
  try {
    answer(c, out.finish());
  } catch (const proto::protocol_error&) {
    answer(c, reply(proto::status::error, "listing of prefix '" + prefix
                                            + "' exceeds the frame limit"));
  }
}

void store_server::impl::handle_lease(connection& c, proto::request& req) {
  if (req.ttl_ms <= 0 || req.ttl_ms > proto::max_timeout_ms) {
    answer(c, reply(proto::status::error,
                    "ttl of " + std::to_string(req.ttl_ms) + " ms for key '"
                      + req.key + "' is not in (0, "
                      + std::to_string(proto::max_timeout_ms) + "]"));
    return;
  }
  auto expires = clock::now() + std::chrono::milliseconds(req.ttl_ms);
  auto it = req.kind == proto::op::set_with_lease
              ? write(req.key, std::move(req.value))
              : data.find(req.key);
  if (it == data.end()) {
    answer(c, reply(proto::status::missing));
    return;
  }
  set_lease(it, expires);
  answer(c, reply(proto::status::ok));
}

entries::iterator store_server::impl::write(const std::string& key,
                                            std::string value) {
  auto it = data.try_emplace(key).first;
  it->second.value = std::move(value);
  store_changed = true;
  return it;
}

void store_server::impl::set_lease(entries::iterator it,
                                   std::optional<clock::time_point> expires) {
  auto& current = it->second.expires;
  if (current)
    leases.erase({*current, it->first});
  current = expires;
  if (current)
    leases.emplace(*current, it->first);
}

void store_server::impl::expire_leases() {
  // Runs before each round of requests; poll() wakes for the first lease.
  auto now = clock::now();
  while (!leases.empty() && leases.begin()->first <= now)
    erase(data.find(leases.begin()->second));
}

void store_server::impl::erase(entries::iterator it) {
  set_lease(it, std::nullopt);
  data.erase(it);
}

bool store_server::impl::has_all(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [this](const auto& key) { return data.count(key) > 0; });
}

void store_server::impl::settle_waits() {
  // Answering a wait releases that client's buffered frames, whose sets may
  // satisfy other waits: repeat until the store stops changing.
  do {
    store_changed = false;
    auto now = clock::now();
    for (auto& [fd, c] : conns) {
      if (!c.wait || c.closed)
        continue;
      if (has_all(c.wait->keys))
        answer(c, reply(proto::status::ok));
      else if (c.wait->deadline <= now)
        answer(c, reply(proto::status::timed_out));
      else
        continue;
      c.wait.reset();
      process_input(c);
    }
  } while (store_changed);
}

void store_server::impl::flush(connection& c) {
  while (!c.out.empty()) {
    auto n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      pending_output -= static_cast<size_t>(n);
      c.out_moved = clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    c.closed = true;
    return;
  }
}

int store_server::impl::next_timeout() const {
  std::optional<clock::time_point> first;
  auto consider = [&first](clock::time_point t) {
    if (!first || t < *first)
      first = t;
  };
  if (!leases.empty())
    consider(leases.begin()->first);
  if (accept_paused)
    consider(accept_paused_at + accept_retry);
  if (refused_unwarned > 0)
    consider(*refusal_warned_at + limits.refusal_warning_interval);
  for (const auto& [fd, c] : conns) {
    if (c.wait)
      consider(c.wait->deadline);
    if (!c.authenticated)
      consider(c.accepted + limits.hello_timeout);
    if (!c.out.empty())
      consider(c.out_moved + limits.slow_reader_timeout);
  }
  return first ? net::poll_timeout(*first) : -1;
}

} // namespace troupe::elastic
