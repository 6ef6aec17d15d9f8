#include "elastic/embedded_store.hpp"

#include "elastic/job_secret.hpp"
#include "elastic/socket_util.hpp"
#include "elastic/store_protocol.hpp"

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>
#include <unistd.h>

namespace troupe::elastic {

namespace {

using net::clock;
namespace proto = protocol;
using std::chrono::milliseconds;

// Deadline of calls that the server answers at once.
constexpr milliseconds call_deadline{30'000};

// Extra time granted on top of a wait's own timeout: the server answers the
// wait when its timeout passes, so only a dead or stuck server exceeds this.
constexpr milliseconds wait_margin{10'000};

// Called right after the failed transfer, while errno still explains it.
std::string describe(net::io_result r) {
  switch (r) {
    case net::io_result::timed_out:
      return "no reply before the deadline";
    case net::io_result::closed:
      return "connection closed by the store";
    default:
      return "socket error: " + net::error_text(errno);
  }
}

std::string quote_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys)
    out += (out.empty() ? "'" : ", '") + key + "'";
  return out;
}

proto::status status_of(proto::frame_reader& in) {
  auto st = in.u8();
  if (st > static_cast<uint8_t>(proto::status::error))
    throw proto::protocol_error("unknown status " + std::to_string(st));
  return static_cast<proto::status>(st);
}

// A status that the op does not use makes the reply malformed.
void expect_ok(proto::status st) {
  if (st != proto::status::ok)
    throw proto::protocol_error("unexpected status "
                                + std::to_string(static_cast<int>(st)));
}

// For ops whose answer is whether the key is there.
bool present(proto::status st) {
  if (st == proto::status::missing)
    return false;
  expect_ok(st);
  return true;
}

// Readers of replies that carry nothing but their status.
bool ok_reply(proto::status st, proto::frame_reader&) {
  expect_ok(st);
  return true;
}

bool presence_reply(proto::status st, proto::frame_reader&) {
  return present(st);
}

} // namespace

embedded_store_client::embedded_store_client(std::string host, uint16_t port,
                                             const std::string& secret,
                                             milliseconds connect_timeout)
  : host_(std::move(host)), port_(port), key_(derive_key(secret, "store")) {
  // The server may start after its clients (a worker can outrun the
  // launcher's store thread), so refused connections are retried.
  auto deadline = clock::now() + connect_timeout;
  auto backoff = milliseconds{20};
  std::string why;
  for (;;) {
    auto fd = net::try_connect(host_, port_, deadline, why);
    if (fd) {
      fd_ = fd.release();
      authenticate(std::chrono::duration_cast<milliseconds>(deadline - clock::now()));
      return;
    }
    auto now = clock::now();
    if (now >= deadline)
      break;
    std::this_thread::sleep_for(std::min<clock::duration>(backoff,
                                                          deadline - now));
    backoff = std::min(backoff * 2, milliseconds{500});
  }
  throw store_error("cannot connect to the store at " + where() + " within "
                    + std::to_string(connect_timeout.count()) + " ms: " + why);
}

embedded_store_client::~embedded_store_client() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string embedded_store_client::where() const {
  return host_ + ":" + std::to_string(port_);
}

store_error embedded_store_client::failure(const std::string& what,
                                  const std::string& why) const {
  return store_error("store " + where() + ": " + what + ": " + why);
}

std::string embedded_store_client::request(const std::string& frame,
                                  milliseconds deadline,
                                  const std::string& what) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto fail = [&](const std::string& why) {
    // The stream is out of step after a failure: later calls fail fast.
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    return failure(what, why);
  };
  if (fd_ < 0)
    throw fail("connection lost by an earlier call");
  auto until = clock::now() + deadline;
  if (auto r = net::send_all(
        fd_, proto::seal(frame, {key_, nonce_}, proto::direction::request, requests_sent_++),
        until);
      r != net::io_result::done)
    throw fail(describe(r));
  nonce_ += std::exchange(hello_nonce_, {});  // (after the hello: its reply on)
  const proto::session_keys keys{key_, nonce_};
  std::string header;
  if (auto r = net::recv_exact(fd_, proto::header_size, header, until);
      r != net::io_result::done)
    throw fail(describe(r));
  try {
    std::string body;
    auto r = net::recv_exact(fd_, proto::body_size(header), body, until);
    if (r != net::io_result::done)
      throw fail(describe(r));
    return std::string(
      proto::unseal(body, keys, proto::direction::reply, replies_read_++));
  } catch (const proto::protocol_error& e) {
    throw fail(std::string("malformed reply: ") + e.what() +
               " (does this process hold the job's secret?)");
  }
}

template <class Read, class Encode, class... Fields>
auto embedded_store_client::call(const std::string& what, milliseconds deadline,
                        Read read, Encode encode, const Fields&... fields) {
  std::string body;
  try {
    body = request(encode(fields...), deadline, what);
  } catch (const proto::protocol_error& e) {
    throw failure(what, e.what()); // a field over the frame limit
  }
  std::string why;
  try {
    proto::frame_reader in{body};
    auto st = status_of(in);
    if (st == proto::status::error) {
      why = in.bytes(); // the server's reason, e.g. a non-integer value
    } else {
      auto result = read(st, in);
      in.expect_end();
      return result;
    }
  } catch (const proto::protocol_error& e) {
    why = e.what();
  }
  throw failure(what, why);
}

void embedded_store_client::authenticate(milliseconds deadline) {
  auto until = clock::now() + deadline;
  std::string header;
  auto r = net::recv_exact(fd_, proto::header_size, header, until);
  try {
    if (r == net::io_result::done && proto::body_size(header) == proto::nonce_size)
      r = net::recv_exact(fd_, proto::nonce_size, nonce_, until);
    else if (r == net::io_result::done)
      throw proto::protocol_error("greeting of the wrong size");
  } catch (const proto::protocol_error& e) {
    ::close(fd_);
    fd_ = -1;
    throw failure("connect", std::string("not a Troupe store: ") + e.what());
  }
  if (r != net::io_result::done) {
    auto why = describe(r);
    // The store closes a connection before greeting it only at its cap.
    if (r == net::io_result::closed)
      why += " (a store at its connection cap closes new connections at once, and "
             "troupe-run warns that it did)";
    ::close(fd_);
    fd_ = -1;
    throw failure("connect", "no greeting: " + why);
  }
  hello_nonce_ = proto::random_nonce();
  try {
    call("authenticate", deadline, ok_reply, proto::encode_hello, hello_nonce_);
  } catch (...) {
    // Thrown from the constructor: no destructor closes it.
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    throw;
  }
}

void embedded_store_client::set(const std::string& key, const std::string& value) {
  call("set '" + key + "'", call_deadline, ok_reply, proto::encode_set, key,
       value);
}

void embedded_store_client::set_many(
  const std::vector<std::pair<std::string, std::string>>& entries) {
  if (entries.empty())
    return;
  call("set of " + std::to_string(entries.size()) + " keys from '" + entries.front().first + "'",
       call_deadline, ok_reply, proto::encode_set_many, entries);
}

std::optional<std::string> embedded_store_client::get(const std::string& key) {
  return call(
    "get '" + key + "'", call_deadline,
    [](proto::status st,
       proto::frame_reader& in) -> std::optional<std::string> {
      if (!present(st))
        return std::nullopt;
      return in.bytes();
    },
    proto::encode_get, key);
}

int64_t embedded_store_client::add(const std::string& key, int64_t delta) {
  return call(
    "add '" + key + "'", call_deadline,
    [](proto::status st, proto::frame_reader& in) {
      expect_ok(st);
      return in.i64();
    },
    proto::encode_add, key, delta);
}

bool embedded_store_client::remove(const std::string& key) {
  return call("remove '" + key + "'", call_deadline, presence_reply,
              proto::encode_remove, key);
}

compare_set_result
embedded_store_client::compare_set(const std::string& key,
                          const std::optional<std::string>& expected,
                          const std::string& desired) {
  return call(
    "compare_set '" + key + "'", call_deadline,
    [](proto::status st, proto::frame_reader& in) {
      expect_ok(st);
      compare_set_result result;
      result.swapped = in.flag();
      result.current = in.optional_bytes();
      return result;
    },
    proto::encode_compare_set, key, expected, desired);
}

std::vector<std::string> embedded_store_client::list(const std::string& prefix) {
  return call(
    "list '" + prefix + "'", call_deadline,
    [](proto::status st, proto::frame_reader& in) {
      expect_ok(st);
      // No reserve(): the count is untrusted until the keys are really there.
      std::vector<std::string> keys;
      for (auto n = in.u32(); n > 0; --n)
        keys.push_back(in.bytes());
      return keys;
    },
    proto::encode_list, prefix, false);
}

std::map<std::string, std::string>
embedded_store_client::list_values(const std::string& prefix) {
  return call(
    "list '" + prefix + "'", call_deadline,
    [](proto::status st, proto::frame_reader& in) {
      expect_ok(st);
      std::map<std::string, std::string> entries;
      for (auto n = in.u32(); n > 0; --n) {
        auto key = in.bytes();
        entries.emplace(std::move(key), in.bytes());
      }
      return entries;
    },
    proto::encode_list, prefix, true);
}

void embedded_store_client::set_with_lease(const std::string& key,
                                  const std::string& value, milliseconds ttl) {
  call("set_with_lease '" + key + "'", call_deadline, ok_reply,
       proto::encode_set_with_lease, key, value, ttl.count());
}

bool embedded_store_client::renew(const std::string& key, milliseconds ttl) {
  return call("renew '" + key + "'", call_deadline, presence_reply,
              proto::encode_renew, key, ttl.count());
}

bool embedded_store_client::wait(const std::vector<std::string>& keys,
                        milliseconds timeout) {
  timeout = std::clamp(timeout, milliseconds{0},
                       milliseconds{proto::max_timeout_ms});
  return call(
    "wait for " + quote_keys(keys), timeout + wait_margin,
    [](proto::status st, proto::frame_reader&) {
      if (st != proto::status::timed_out)
        expect_ok(st);
      return st == proto::status::ok;
    },
    proto::encode_wait, keys, timeout.count());
}

} // namespace troupe::elastic
