#include "elastic/etcd_store_client.hpp"

#include "elastic/job_secret.hpp"

#include <algorithm>
#include <charconv>
#include <mutex>
#include <thread>

#include <curl/curl.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

namespace troupe::elastic {

namespace {

using json = nlohmann::json;
using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Deadline of one request; etcd answers at once or not at all.
constexpr milliseconds call_deadline{30'000};
// wait()'s polls: the first soon after the call, then further apart.
constexpr milliseconds first_poll{2};
constexpr milliseconds longest_poll{50};
// etcd's default --max-txn-ops: wait() checks this many keys per request.
constexpr size_t max_txn_ops = 128;

std::string base64(std::string_view raw) {
  std::string out(4 * ((raw.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(raw.data()),
                                static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string unbase64(const std::string& text) {
  if (text.size() % 4 != 0)
    throw store_error("etcd replied with base64 text of length " + std::to_string(text.size()));
  std::string out(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0)
    throw store_error("etcd replied with malformed base64");
  // EVP_DecodeBlock counts the padding as zero bytes.
  const auto pad = static_cast<size_t>(std::count(text.end() - std::min<size_t>(2, text.size()),
                                                  text.end(), '='));
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

// The end of etcd's range holding every key that starts with `prefix`.
std::string prefix_end(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff)
    prefix.pop_back();
  if (prefix.empty())
    return std::string(1, '\0');  // etcd: every key
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

// A reply that is not what the gateway sends; impl::reading() adds the
// store and the request. Every read of a reply goes through the accessors
// below, so that an odd reply is a store_error, never nlohmann's type_error.
class bad_reply : public store_error {
public:
  using store_error::store_error;
};

std::string shown(const json& j) {
  auto text = j.dump();
  return text.size() > 80 ? text.substr(0, 80) + "..." : text;
}

// `j`'s field `name` (absent: nothing); `j` must be an object.
const json* field(const json& j, const char* name) {
  if (!j.is_object())
    throw bad_reply("expected an object holding '" + std::string(name) + "', got " + shown(j));
  auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}

bad_reply wrong_type(const char* name, const json& value, const char* expected) {
  return bad_reply("reply field '" + std::string(name) + "' is " + value.type_name() + " " +
                   shown(value) + ", expected " + expected);
}

// The gateway leaves out fields holding their zero value.
std::string string_field(const json& j, const char* name) {
  const auto* f = field(j, name);
  if (!f)
    return {};
  if (!f->is_string())
    throw wrong_type(name, *f, "a string");
  return f->get<std::string>();
}

bool bool_field(const json& j, const char* name) {
  const auto* f = field(j, name);
  if (!f)
    return false;
  if (!f->is_boolean())
    throw wrong_type(name, *f, "a boolean");
  return f->get<bool>();
}

json array_field(const json& j, const char* name) {
  const auto* f = field(j, name);
  if (!f)
    return json::array();
  if (!f->is_array())
    throw wrong_type(name, *f, "an array");
  return *f;
}

json object_field(const json& j, const char* name) {
  const auto* f = field(j, name);
  if (!f)
    return json::object();
  if (!f->is_object())
    throw wrong_type(name, *f, "an object");
  return *f;
}

// The gateway writes int64 fields as strings.
int64_t int_field(const json& j, const char* name) {
  const auto* f = field(j, name);
  if (!f)
    return 0;
  if (f->is_number_integer())
    return f->get<int64_t>();
  int64_t value = 0;
  const auto text = f->is_string() ? f->get<std::string>() : std::string();
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
    throw wrong_type(name, *f, "an integer");
  return value;
}

// A compare that holds when the key is absent.
json absent(const std::string& key64) {
  return {{"key", key64}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", 0}};
}

size_t collect(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

} // namespace

struct etcd_store_client::impl {
  store_endpoint where;
  std::string base_url;
  std::string mac_key;
  std::mutex mtx;  // one request at a time on `curl`
  CURL* curl = nullptr;
  curl_slist* headers = nullptr;

  impl(store_endpoint w, const std::string& secret)
    : where(std::move(w)), mac_key(derive_key(secret, "etcd-values")) {
    static const bool ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    curl = ready ? curl_easy_init() : nullptr;
    headers = curl_slist_append(nullptr, "Content-Type: application/json");
    if (!curl || !headers)
      throw store_error("etcd: cannot initialise libcurl");
    const auto host = where.host.find(':') != std::string::npos ? "[" + where.host + "]"
                                                                : where.host;
    base_url = "http://" + host + ":" + std::to_string(where.port);
  }

  ~impl() {
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
  }

  store_error failure(const std::string& what, const std::string& why) const {
    return store_error("store " + where.describe() + ": " + what + ": " + why);
  }

  // Runs `read` on a reply of request `what`: a reply of unexpected shape
  // becomes a store_error naming the store, the request and the field.
  template <class Read>
  auto reading(const std::string& what, Read read) const {
    try {
      return read();
    } catch (const bad_reply& e) {
      throw failure(what, std::string("unexpected reply: ") + e.what());
    } catch (const json::exception& e) {  // none expected: the accessors check
      throw failure(what, std::string("unexpected reply: ") + e.what());
    }
  }

  std::string full(const std::string& key) const {
    return where.prefix + key;
  }

  // The tag binds the value to its key: a sealed value moved to another
  // key does not verify.
  std::string tag(const std::string& full_key, std::string_view value) const {
    std::string message = std::to_string(full_key.size()) + ":" + full_key;
    message.append(value);
    return hmac_sha256(mac_key, message);
  }

  std::string sealed64(const std::string& key, const std::string& value) const {
    return base64(tag(full(key), value) + value);
  }

  // The value of one of the gateway's key-values.
  std::string unseal(const json& kv, const std::string& what) const {
    const auto key = unbase64(string_field(kv, "key"));
    const auto stored = unbase64(string_field(kv, "value"));
    constexpr size_t tag_size = 32;
    if (stored.size() < tag_size ||
        !equal_digests(stored.substr(0, tag_size), tag(key, stored.substr(tag_size))))
      throw failure(what, "the value of '" + key +
                            "' is not sealed with this job's secret (written by another job, "
                            "or altered)");
    return stored.substr(tag_size);
  }

  json put(const std::string& key, const std::string& value, bool keep_lease) const {
    json p{{"key", base64(full(key))}, {"value", sealed64(key, value)}};
    if (keep_lease)
      p["ignore_lease"] = true;
    return p;
  }

  // POSTs `body` to the gateway's `path` and returns the reply; throws
  // store_error naming `what`.
  json post(const std::string& path, const json& body, const std::string& what,
            milliseconds timeout = call_deadline) {
    const auto text = body.dump();
    std::string reply;
    char error[CURL_ERROR_SIZE] = {};
    long code = 0;
    CURLcode rc;
    {
      std::lock_guard<std::mutex> serial{mtx};
      const auto url = base_url + path;
      curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
      curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, text.c_str());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(text.size()));
      curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
      curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
      curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
      curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                       static_cast<long>(std::max<int64_t>(1, timeout.count())));
      // Several threads use libcurl: no SIGALRM for its timeouts.
      curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
      rc = curl_easy_perform(curl);
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
      curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
    }
    if (rc != CURLE_OK)
      throw failure(what, std::string(curl_easy_strerror(rc)) + (error[0] ? ": " : "") + error);
    auto j = json::parse(reply, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw failure(what, "HTTP " + std::to_string(code) + ", not a JSON object: " +
                            reply.substr(0, 200));
    if (code != 200) {
      std::string why = reply.substr(0, 200);
      for (const char* name : {"error", "message"})
        if (auto it = j.find(name); it != j.end() && it->is_string())
          why = it->get<std::string>();
      throw failure(what, "HTTP " + std::to_string(code) + ": " + why);
    }
    return j;
  }

  json txn(json compare, json success, json failure_ops, const std::string& what) {
    return post("/v3/kv/txn",
                {{"compare", std::move(compare)},
                 {"success", std::move(success)},
                 {"failure", std::move(failure_ops)}},
                what);
  }

  int64_t grant(milliseconds ttl, const std::string& what) {
    if (ttl.count() <= 0)
      throw failure(what, "ttl " + std::to_string(ttl.count()) + " ms is not positive");
    const auto seconds = (ttl.count() + 999) / 1000;
    const auto reply = post("/v3/lease/grant", {{"TTL", seconds}}, what);
    return reading(what, [&] { return int_field(reply, "ID"); });
  }

  // Every key of `full_keys` exists now.
  bool all_present(const std::vector<std::string>& full_keys, const std::string& what) {
    for (size_t first = 0; first < full_keys.size(); first += max_txn_ops) {
      json ranges = json::array();
      for (size_t i = first; i < std::min(full_keys.size(), first + max_txn_ops); ++i)
        ranges.push_back(
          {{"request_range", {{"key", base64(full_keys[i])}, {"count_only", true}}}});
      const auto reply = txn(json::array(), std::move(ranges), json::array(), what);
      const bool all = reading(what, [&] {
        for (const auto& r : array_field(reply, "responses"))
          if (int_field(object_field(r, "response_range"), "count") == 0)
            return false;
        return true;
      });
      if (!all)
        return false;
    }
    return true;
  }

  json range_of(const std::string& prefix, bool keys_only, const std::string& what) {
    json req{{"key", base64(full(prefix))}, {"range_end", base64(prefix_end(full(prefix)))}};
    if (keys_only)
      req["keys_only"] = true;
    const auto reply = post("/v3/kv/range", req, what);
    return reading(what, [&] { return array_field(reply, "kvs"); });
  }

  std::string short_key(const json& kv) const {
    const auto key = unbase64(string_field(kv, "key"));
    if (key.compare(0, where.prefix.size(), where.prefix) != 0)
      throw bad_reply("key '" + key + "' is outside the prefix '" + where.prefix + "'");
    return key.substr(where.prefix.size());
  }
};

etcd_store_client::etcd_store_client(store_endpoint where, const std::string& secret,
                                     milliseconds connect_timeout)
  : impl_(std::make_unique<impl>(std::move(where), secret)) {
  // etcd may come up after its clients: retry until the deadline.
  const auto deadline = clock::now() + connect_timeout;
  auto pause = milliseconds{20};
  for (;;) {
    try {
      impl_->post("/v3/kv/range", {{"key", base64(impl_->where.prefix)}, {"count_only", true}},
                  "connect", std::max(milliseconds{1}, std::chrono::duration_cast<milliseconds>(
                                                        deadline - clock::now())));
      return;
    } catch (const store_error& e) {
      const auto now = clock::now();
      if (now >= deadline)
        throw store_error("cannot reach etcd at " + impl_->where.describe() + " within " +
                          std::to_string(connect_timeout.count()) + " ms: " + e.what());
      std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, milliseconds{500});
    }
  }
}

etcd_store_client::~etcd_store_client() = default;

std::string etcd_store_client::where() const {
  return impl_->where.describe();
}

void etcd_store_client::set(const std::string& key, const std::string& value) {
  impl_->post("/v3/kv/put", impl_->put(key, value, false), "set '" + key + "'");
}

std::optional<std::string> etcd_store_client::get(const std::string& key) {
  const auto what = "get '" + key + "'";
  const auto reply = impl_->post("/v3/kv/range", {{"key", base64(impl_->full(key))}}, what);
  return impl_->reading(what, [&]() -> std::optional<std::string> {
    const auto kvs = array_field(reply, "kvs");
    if (kvs.empty())
      return std::nullopt;
    return impl_->unseal(kvs.front(), what);
  });
}

int64_t etcd_store_client::add(const std::string& key, int64_t delta) {
  const auto what = "add '" + key + "'";
  const auto key64 = base64(impl_->full(key));
  const auto deadline = clock::now() + call_deadline;
  // Read, then write if nobody wrote in between (the key's mod revision);
  // a writer that lost the race reads again.
  for (;;) {
    const auto range = impl_->post("/v3/kv/range", {{"key", key64}}, what);
    const auto kvs = impl_->reading(what, [&] { return array_field(range, "kvs"); });
    int64_t value = 0;
    json unchanged = absent(key64);
    if (!kvs.empty()) {
      const auto text = impl_->reading(what, [&] { return impl_->unseal(kvs.front(), what); });
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc{} || end != text.data() + text.size())
        throw impl_->failure(what, "value of key '" + key + "' is not an integer");
      unchanged = {{"key", key64},
                   {"target", "MOD"},
                   {"result", "EQUAL"},
                   {"mod_revision",
                    impl_->reading(what, [&] { return int_field(kvs.front(), "mod_revision"); })}};
    }
    value += delta;
    const auto reply = impl_->txn(json::array({unchanged}),
                                  json::array({{{"request_put",
                                                 impl_->put(key, std::to_string(value),
                                                            !kvs.empty())}}}),
                                  json::array(), what);
    if (impl_->reading(what, [&] { return bool_field(reply, "succeeded"); }))
      return value;
    if (clock::now() >= deadline)
      throw impl_->failure(what, "lost every race with other writers for " +
                                   std::to_string(call_deadline.count()) + " ms");
  }
}

bool etcd_store_client::remove(const std::string& key) {
  const auto what = "remove '" + key + "'";
  const auto reply = impl_->post("/v3/kv/deleterange", {{"key", base64(impl_->full(key))}}, what);
  return impl_->reading(what, [&] { return int_field(reply, "deleted"); }) > 0;
}

compare_set_result etcd_store_client::compare_set(const std::string& key,
                                                  const std::optional<std::string>& expected,
                                                  const std::string& desired) {
  const auto what = "compare_set '" + key + "'";
  const auto key64 = base64(impl_->full(key));
  // Sealing is deterministic, so the stored bytes of `expected` are known.
  const json holds = expected ? json{{"key", key64},
                                     {"target", "VALUE"},
                                     {"result", "EQUAL"},
                                     {"value", impl_->sealed64(key, *expected)}}
                              : absent(key64);
  const auto reply = impl_->txn(
    json::array({holds}),
    json::array({{{"request_put", impl_->put(key, desired, expected.has_value())}}}),
    json::array({{{"request_range", {{"key", key64}}}}}), what);
  return impl_->reading(what, [&] {
    compare_set_result out;
    out.swapped = bool_field(reply, "succeeded");
    if (out.swapped) {
      out.current = desired;
      return out;
    }
    const auto responses = array_field(reply, "responses");
    if (responses.empty())
      throw impl_->failure(what, "the transaction's reply has no range");
    const auto kvs = array_field(object_field(responses.front(), "response_range"), "kvs");
    if (!kvs.empty())
      out.current = impl_->unseal(kvs.front(), what);
    return out;
  });
}

std::vector<std::string> etcd_store_client::list(const std::string& prefix) {
  const auto what = "list '" + prefix + "'";
  const auto kvs = impl_->range_of(prefix, true, what);
  return impl_->reading(what, [&] {
    std::vector<std::string> keys;
    for (const auto& kv : kvs)
      keys.push_back(impl_->short_key(kv));
    return keys;
  });
}

std::map<std::string, std::string> etcd_store_client::list_values(const std::string& prefix) {
  const auto what = "list '" + prefix + "'";
  const auto kvs = impl_->range_of(prefix, false, what);
  return impl_->reading(what, [&] {
    std::map<std::string, std::string> out;
    for (const auto& kv : kvs)
      out.emplace(impl_->short_key(kv), impl_->unseal(kv, what));
    return out;
  });
}

void etcd_store_client::set_with_lease(const std::string& key, const std::string& value,
                                       milliseconds ttl) {
  const auto what = "set_with_lease '" + key + "'";
  auto p = impl_->put(key, value, false);
  p["lease"] = impl_->grant(ttl, what);
  impl_->post("/v3/kv/put", p, what);
}

bool etcd_store_client::renew(const std::string& key, milliseconds ttl) {
  const auto what = "renew '" + key + "'";
  const auto key64 = base64(impl_->full(key));
  // A fresh lease of `ttl` replaces the key's own; an unused one expires.
  const auto lease = impl_->grant(ttl, what);
  const json exists{{"key", key64}, {"target", "VERSION"}, {"result", "GREATER"}, {"version", 0}};
  const json move{{"key", key64}, {"ignore_value", true}, {"lease", lease}};
  const auto reply =
    impl_->txn(json::array({exists}), json::array({{{"request_put", move}}}), json::array(), what);
  return impl_->reading(what, [&] { return bool_field(reply, "succeeded"); });
}

bool etcd_store_client::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  std::string what = "wait for";
  std::vector<std::string> full_keys;
  for (const auto& key : keys) {
    what += (full_keys.empty() ? " '" : ", '") + key + "'";
    full_keys.push_back(impl_->full(key));
  }
  const auto deadline = clock::now() + std::max(timeout, milliseconds{0});
  auto pause = first_poll;
  for (;;) {
    if (impl_->all_present(full_keys, what))
      return true;
    const auto now = clock::now();
    if (now >= deadline)
      return false;
    std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, longest_poll);
  }
}

} // namespace troupe::elastic
