// The etcd client against a fake gateway that answers with replies of the
// wrong shape: every call fails with a store_error naming the store, the
// request and the field (nlohmann's type_error escaped the callers, which
// catch store_error only, and ended the process).

#include "elastic/etcd_store_client.hpp"
#include "elastic/launcher_beacon.hpp"
#include "elastic/socket_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace troupe::elastic {
namespace {

using namespace std::chrono_literals;

// Answers each POST (one per connection) with the reply set for its path,
// else HTTP 200 "{}".
class fake_gateway {
public:
  fake_gateway() : listener_(net::listen_on("127.0.0.1", 0)) {
    port_ = net::local_port(listener_.get());
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_gateway() {
    stop_ = true;
    thread_.join();
  }

  void reply(const std::string& path, int code, const std::string& body) {
    std::lock_guard<std::mutex> guard{mtx_};
    replies_[path] = {code, body};
  }

  store_endpoint where() const {
    store_endpoint w;
    w.kind = store_endpoint::backend::etcd;
    w.host = "127.0.0.1";
    w.port = port_;
    w.prefix = "troupe/";
    return w;
  }

private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0)
        continue;
      net::unique_fd c{::accept(listener_.get(), nullptr, nullptr)};
      if (c)
        answer(c.get());
    }
  }

  void answer(int fd) {
    std::string in;
    char buf[4096];
    size_t body_at = std::string::npos, length = 0;
    while (body_at == std::string::npos || in.size() < body_at + length) {
      auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0)
        return;
      in.append(buf, static_cast<size_t>(n));
      if (body_at == std::string::npos && (body_at = in.find("\r\n\r\n")) != std::string::npos) {
        body_at += 4;
        auto at = in.find("Content-Length: ");
        if (at != std::string::npos && at < body_at)
          length = std::stoul(in.substr(at + 16));
      }
    }
    const auto path = in.substr(5, in.find(' ', 5) - 5);  // "POST /v3/..."
    std::pair<int, std::string> r{200, "{}"};
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (auto it = replies_.find(path); it != replies_.end())
        r = it->second;
    }
    const auto out = "HTTP/1.1 " + std::to_string(r.first) +
                     " X\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(r.second.size()) + "\r\nConnection: close\r\n\r\n" + r.second;
    [[maybe_unused]] auto n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
  }

  net::unique_fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mtx_;
  std::map<std::string, std::pair<int, std::string>> replies_;
  std::thread thread_;
};

const std::string secret = "etcd-reply-test-secret-0123456789";

// What `call` threw: a store_error's text, or a note of anything else.
template <class Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const store_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a store_error: ") + e.what();
  }
  return "no error";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(etcd_replies, of_the_wrong_shape_are_store_errors_naming_request_and_field) {
  fake_gateway gw;
  etcd_store_client store{gw.where(), secret, 5s};
  const auto at = "store etcd://127.0.0.1:" + std::to_string(gw.where().port) + "/troupe/: ";

  gw.reply("/v3/kv/range", 200, R"({"kvs":[{"key":5,"value":"eA=="}]})");
  auto e = error_of([&] { store.get("k"); });
  EXPECT_HAS(e, at + "get 'k': unexpected reply: reply field 'key' is number 5, expected a string");
  e = error_of([&] { store.add("k", 1); });
  EXPECT_HAS(e, at + "add 'k': unexpected reply: reply field 'key' is number");

  gw.reply("/v3/kv/range", 200, R"({"kvs":"none"})");
  e = error_of([&] { store.list_values("p/"); });
  EXPECT_HAS(e, at + "list 'p/': unexpected reply: reply field 'kvs' is string \"none\", "
                     "expected an array");
  gw.reply("/v3/kv/range", 200, R"({"kvs":["x"]})");
  e = error_of([&] { store.list("p/"); });
  EXPECT_HAS(e, at + "list 'p/': unexpected reply: expected an object holding 'key', got \"x\"");

  gw.reply("/v3/kv/txn", 200, R"({"succeeded":"no"})");
  e = error_of([&] { store.compare_set("k", std::nullopt, "v"); });
  EXPECT_HAS(e, at + "compare_set 'k': unexpected reply: reply field 'succeeded' is string");
  gw.reply("/v3/kv/txn", 200, R"({"succeeded":false,"responses":[{"response_range":[]}]})");
  e = error_of([&] { store.compare_set("k", std::nullopt, "v"); });
  EXPECT_HAS(e, "reply field 'response_range' is array [], expected an object");
  e = error_of([&] { store.wait({"k"}, 10ms); });
  EXPECT_HAS(e, at + "wait for 'k': unexpected reply: reply field 'response_range' is array");

  gw.reply("/v3/lease/grant", 200, R"({"ID":true})");
  e = error_of([&] { store.set_with_lease("k", "v", 5s); });
  EXPECT_HAS(e, at + "set_with_lease 'k': unexpected reply: reply field 'ID' is boolean true, "
                     "expected an integer");
  gw.reply("/v3/lease/grant", 200, R"({"ID":"7"})");
  gw.reply("/v3/kv/txn", 200, R"({"succeeded":1})");
  e = error_of([&] { store.renew("k", 5s); });
  EXPECT_HAS(e, at + "renew 'k': unexpected reply: reply field 'succeeded' is number 1");

  gw.reply("/v3/kv/deleterange", 200, R"({"deleted":{}})");
  e = error_of([&] { store.remove("k"); });
  EXPECT_HAS(e, at + "remove 'k': unexpected reply: reply field 'deleted' is object");

  // An error reply whose message is not a string shows the reply itself.
  gw.reply("/v3/kv/put", 503, R"({"message":{"x":1}})");
  e = error_of([&] { store.set("k", "v"); });
  EXPECT_HAS(e, at + "set 'k': HTTP 503: {\"message\":{\"x\":1}}");
  gw.reply("/v3/kv/put", 503, R"({"error":"etcdserver: leader changed","code":14})");
  e = error_of([&] { store.set("k", "v"); });
  EXPECT_HAS(e, at + "set 'k': HTTP 503: etcdserver: leader changed");
}

// troupe-run's beacon renews its key every second on a thread of its own,
// catching store_error: an odd reply used to end troupe-run there.
TEST(etcd_replies, of_the_wrong_shape_do_not_end_the_launcher_beacon) {
  fake_gateway gw;
  gw.reply("/v3/lease/grant", 200, R"({"ID":"7"})");
  {
    launcher_beacon beacon{std::make_unique<etcd_store_client>(gw.where(), secret, 5s), "job"};
    gw.reply("/v3/kv/txn", 200, R"({"succeeded":[]})");
    std::this_thread::sleep_for(1500ms);  // one renewal at least
  }
  SUCCEED();
}

} // namespace
} // namespace troupe::elastic
