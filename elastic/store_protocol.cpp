#include "elastic/store_protocol.hpp"

#include "elastic/job_secret.hpp"

#include <stdexcept>

#include <openssl/rand.h>

namespace troupe::elastic::protocol {

namespace {

uint64_t load_be(std::string_view bytes) {
  uint64_t v = 0;
  for (char c : bytes)
    v = (v << 8) | static_cast<unsigned char>(c);
  return v;
}

void store_be(std::string& out, uint64_t v, size_t width) {
  for (size_t i = width; i-- > 0;)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

} // namespace

frame_writer& frame_writer::u8(uint8_t v) {
  body_.push_back(static_cast<char>(v));
  return *this;
}

frame_writer& frame_writer::u32(uint32_t v) {
  store_be(body_, v, 4);
  return *this;
}

frame_writer& frame_writer::i64(int64_t v) {
  store_be(body_, static_cast<uint64_t>(v), 8);
  return *this;
}

frame_writer& frame_writer::flag(bool v) {
  return u8(v ? 1 : 0);
}

frame_writer& frame_writer::bytes(std::string_view v) {
  if (v.size() > max_body_size)
    throw protocol_error("field of " + std::to_string(v.size())
                         + " bytes exceeds the frame limit");
  u32(static_cast<uint32_t>(v.size()));
  body_.append(v);
  return *this;
}

frame_writer&
frame_writer::optional_bytes(const std::optional<std::string>& v) {
  flag(v.has_value());
  return v ? bytes(*v) : *this;
}

std::string frame_writer::finish() const {
  if (body_.size() > max_body_size)
    throw protocol_error("frame of " + std::to_string(body_.size())
                         + " bytes exceeds the limit");
  std::string frame;
  frame.reserve(header_size + body_.size());
  store_be(frame, body_.size(), header_size);
  frame += body_;
  return frame;
}

std::string_view frame_reader::take(size_t n) {
  if (rest_.size() < n)
    throw protocol_error("truncated frame");
  auto head = rest_.substr(0, n);
  rest_.remove_prefix(n);
  return head;
}

uint8_t frame_reader::u8() {
  return static_cast<uint8_t>(load_be(take(1)));
}

uint32_t frame_reader::u32() {
  return static_cast<uint32_t>(load_be(take(4)));
}

int64_t frame_reader::i64() {
  return static_cast<int64_t>(load_be(take(8)));
}

bool frame_reader::flag() {
  auto v = u8();
  if (v > 1)
    throw protocol_error("flag byte " + std::to_string(v) + " is not 0 or 1");
  return v == 1;
}

std::string frame_reader::bytes() {
  auto n = u32();
  return std::string(take(n));
}

std::optional<std::string> frame_reader::optional_bytes() {
  if (!flag())
    return std::nullopt;
  return bytes();
}

void frame_reader::expect_end() const {
  if (!rest_.empty())
    throw protocol_error("trailing bytes in frame");
}

size_t body_size(std::string_view header) {
  auto body = load_be(header.substr(0, header_size));
  if (body > max_body_size + tag_size)
    throw protocol_error("frame length " + std::to_string(body)
                         + " exceeds the limit");
  return static_cast<size_t>(body);
}

size_t frame_size(std::string_view buf) {
  if (buf.size() < header_size)
    return 0;
  auto total = header_size + body_size(buf);
  return buf.size() < total ? 0 : total;
}

namespace {

std::string tag(std::string_view message, const session_keys& keys, direction d, uint64_t seq) {
  std::string input;
  input.reserve(1 + keys.nonce.size() + 8 + message.size());
  input.push_back(static_cast<char>(d));
  input += keys.nonce;
  store_be(input, seq, 8);
  input += message;
  return hmac_sha256(keys.key, input);
}

} // namespace

std::string seal(std::string_view frame, const session_keys& keys, direction d, uint64_t seq) {
  const auto message = frame.substr(header_size);
  std::string out;
  out.reserve(frame.size() + tag_size);
  store_be(out, message.size() + tag_size, header_size);
  out += tag(message, keys, d, seq);
  out += message;
  return out;
}

std::string_view unseal(std::string_view body, const session_keys& keys, direction d,
                        uint64_t seq) {
  if (body.size() < tag_size)
    throw protocol_error("frame too short to carry an authentication tag");
  const auto message = body.substr(tag_size);
  if (!equal_digests(body.substr(0, tag_size), tag(message, keys, d, seq)))
    throw protocol_error("not authenticated: the frame's tag does not match the job's secret");
  return message;
}

std::string encode_greeting(std::string_view nonce) {
  std::string out;
  store_be(out, nonce.size(), header_size);
  out += nonce;
  return out;
}

namespace {

uint32_t key_count(frame_reader& in) {
  const auto count = in.u32();
  if (count > max_keys)
    throw protocol_error("a request naming " + std::to_string(count) + " keys (at most " +
                         std::to_string(max_keys) + ")");
  return count;
}

} // namespace

request decode_request(std::string_view body) {
  frame_reader in{body};
  request req;
  auto kind = in.u8();
  switch (static_cast<op>(kind)) {
    case op::set:
      req.key = in.bytes();
      req.value = in.bytes();
      break;
    case op::get:
    case op::remove:
      req.key = in.bytes();
      break;
    case op::add:
      req.key = in.bytes();
      req.delta = in.i64();
      break;
    case op::wait: {
      // No reserve(): the count is untrusted until the keys are really there.
      auto count = key_count(in);
      for (uint32_t i = 0; i < count; ++i)
        req.keys.push_back(in.bytes());
      req.timeout_ms = in.i64();
      break;
    }
    case op::compare_set:
      req.key = in.bytes();
      req.expected = in.optional_bytes();
      req.value = in.bytes();
      break;
    case op::list:
      req.key = in.bytes();
      req.with_values = in.flag();
      break;
    case op::set_with_lease:
      req.key = in.bytes();
      req.value = in.bytes();
      req.ttl_ms = in.i64();
      break;
    case op::renew:
      req.key = in.bytes();
      req.ttl_ms = in.i64();
      break;
    case op::hello:
      req.value = in.bytes();
      if (req.value.size() != nonce_size)
        throw protocol_error("a hello carrying a nonce of " + std::to_string(req.value.size()) +
                             " bytes, not " + std::to_string(nonce_size));
      break;
    case op::set_many: {
      auto count = key_count(in);
      for (uint32_t i = 0; i < count; ++i) {
        req.keys.push_back(in.bytes());
        req.values.push_back(in.bytes());
      }
      break;
    }
    default:
      throw protocol_error("unknown op " + std::to_string(kind));
  }
  req.kind = static_cast<op>(kind);
  in.expect_end();
  return req;
}

namespace {

frame_writer begin(op kind) {
  frame_writer out;
  out.u8(static_cast<uint8_t>(kind));
  return out;
}

} // namespace

std::string encode_set(std::string_view key, std::string_view value) {
  return begin(op::set).bytes(key).bytes(value).finish();
}

std::string encode_get(std::string_view key) {
  return begin(op::get).bytes(key).finish();
}

std::string encode_add(std::string_view key, int64_t delta) {
  return begin(op::add).bytes(key).i64(delta).finish();
}

std::string encode_wait(const std::vector<std::string>& keys,
                        int64_t timeout_ms) {
  auto out = begin(op::wait);
  out.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& key : keys)
    out.bytes(key);
  return out.i64(timeout_ms).finish();
}

std::string encode_remove(std::string_view key) {
  return begin(op::remove).bytes(key).finish();
}

std::string encode_compare_set(std::string_view key,
                               const std::optional<std::string>& expected,
                               std::string_view desired) {
  return begin(op::compare_set)
    .bytes(key)
    .optional_bytes(expected)
    .bytes(desired)
    .finish();
}

std::string encode_list(std::string_view prefix, bool with_values) {
  return begin(op::list).bytes(prefix).flag(with_values).finish();
}

std::string encode_set_with_lease(std::string_view key, std::string_view value,
                                  int64_t ttl_ms) {
  return begin(op::set_with_lease).bytes(key).bytes(value).i64(ttl_ms).finish();
}

std::string encode_renew(std::string_view key, int64_t ttl_ms) {
  return begin(op::renew).bytes(key).i64(ttl_ms).finish();
}

std::string encode_hello(std::string_view client_nonce) {
  return begin(op::hello).bytes(client_nonce).finish();
}

std::string random_nonce() {
  std::string nonce(nonce_size, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) !=
      1)
    throw std::runtime_error("store: cannot draw a random nonce");
  return nonce;
}

std::string encode_set_many(const std::vector<std::pair<std::string, std::string>>& entries) {
  auto out = begin(op::set_many);
  out.u32(static_cast<uint32_t>(entries.size()));
  for (const auto& [key, value] : entries)
    out.bytes(key).bytes(value);
  return out.finish();
}

} // namespace troupe::elastic::protocol
