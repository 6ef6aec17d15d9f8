#pragma once

#include "elastic/store.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// Wire format of the rendezvous store. Every message is a frame: a 4-byte
// big-endian body length followed by the body. A request body starts with an
// op byte, a reply body with a status byte; strings are a 4-byte big-endian
// length plus raw bytes, integers are 8-byte big-endian two's complement, a
// flag is one byte 0 or 1, and an optional string is a flag plus, when set,
// the string. Any op may instead be answered with error + message.
//
// Authentication: the server opens each connection with a greeting frame
// whose body is a fresh random nonce. Every later frame body, either way, is
// a tag followed by the message above, tag = HMAC-SHA256(key, direction ||
// nonce || 8-byte big-endian sequence number || message), the key derived
// from the job's secret and the sequence number counting that direction's
// frames from 0. A client's first request must be `hello`, carrying a fresh
// random nonce of its own; from the hello's reply on, `nonce` is the
// server's followed by the client's. So a frame cannot be forged, altered,
// replayed or moved to another connection, in either direction (a recorded
// session's replies do not verify for a client that drew another nonce).
// Until it has authenticated, a connection may send nothing larger than a
// hello.
namespace troupe::elastic::protocol {

enum class op : uint8_t {
  set = 1,            // key, value                -> ok
  get = 2,            // key                       -> ok + value | missing
  add = 3,            // key, delta                -> ok + new value
  wait = 4,           // key count, keys, timeout ms -> ok | timed_out
  remove = 5,         // key                       -> ok | missing
  compare_set = 6,    // key, optional expected, desired
                      //   -> ok + swapped flag + optional current value
  list = 7,           // prefix, with-values flag
                      //   -> ok + count + count * (key [, value]), sorted
  set_with_lease = 8, // key, value, ttl ms        -> ok
  renew = 9,          // key, ttl ms               -> ok | missing
  hello = 10,         // client nonce              -> ok; the first request
  set_many = 11,      // count, (key, value) pairs -> ok
};

enum class status : uint8_t {
  ok = 0,
  missing = 1,
  timed_out = 2,
  error = 3,
};

/// Messages above this size are treated as garbage rather than buffered.
constexpr uint32_t max_body_size = 64u << 20;
/// Keys one wait or set_many may name: a frame of empty keys would
/// otherwise decode into 16 million strings (half a gigabyte).
constexpr uint32_t max_keys = 1u << 20;
constexpr size_t header_size = 4;
constexpr size_t nonce_size = 32;
constexpr size_t tag_size = 32;
/// A sealed hello: header, tag, op byte, the client's nonce as a string.
constexpr size_t hello_frame_size = header_size + tag_size + 1 + 4 + nonce_size;

/// Which way a sealed frame travels (part of its tag).
enum class direction : char { request = 'Q', reply = 'R' };

/// Longest wait either side accepts (30 days), so deadlines cannot overflow.
constexpr int64_t max_timeout_ms = 30LL * 24 * 3600 * 1000;

/// A frame that does not follow the format above. A store_error, so that a
/// client call only ever throws store_error.
class protocol_error : public store_error {
public:
  using store_error::store_error;
};

/// Builds one frame field by field.
class frame_writer {
public:
  frame_writer& u8(uint8_t v);
  frame_writer& u32(uint32_t v);
  frame_writer& i64(int64_t v);
  frame_writer& flag(bool v);
  frame_writer& bytes(std::string_view v);
  frame_writer& optional_bytes(const std::optional<std::string>& v);

  /// The finished frame: length header plus body.
  std::string finish() const;

private:
  std::string body_;
};

/// Reads the fields of one frame body; throws protocol_error on truncation.
class frame_reader {
public:
  explicit frame_reader(std::string_view body) : rest_(body) {
    // nop
  }

  uint8_t u8();
  uint32_t u32();
  int64_t i64();
  bool flag();
  std::string bytes();
  std::optional<std::string> optional_bytes();

  /// Throws when bytes are left over: a frame must be consumed exactly.
  void expect_end() const;

private:
  std::string_view take(size_t n);

  std::string_view rest_;
};

/// Body length announced by a frame header (`header` holds at least
/// header_size bytes). Throws protocol_error for a length above a sealed
/// message of max_body_size.
size_t body_size(std::string_view header);

/// Size (header included) of the frame at the front of `buf`, or 0 while it
/// is incomplete. Throws protocol_error for an oversized length.
size_t frame_size(std::string_view buf);

/// A decoded request; only the fields of its op are meaningful.
struct request {
  op kind = op::get;
  std::string key;   // list: the prefix
  std::string value; // compare_set: the desired value
  int64_t delta = 0;
  std::optional<std::string> expected; // compare_set; nothing = key absent
  std::vector<std::string> keys;   // wait, set_many
  std::vector<std::string> values; // set_many, parallel to keys
  int64_t timeout_ms = 0;
  int64_t ttl_ms = 0;
  bool with_values = false;
};

/// Where a connection's sealed frames belong: the store key (derived from
/// the job's secret) and the nonce of the server's greeting.
struct session_keys {
  std::string key;
  std::string nonce;
};

/// `frame` (a finished frame: header and message) sealed as the `seq`-th
/// frame travelling in direction `d`.
std::string seal(std::string_view frame, const session_keys& keys, direction d, uint64_t seq);

/// The message inside a sealed frame body; throws protocol_error when the
/// tag does not match (another secret, an altered or replayed frame).
std::string_view unseal(std::string_view body, const session_keys& keys, direction d,
                        uint64_t seq);

/// The greeting frame carrying `nonce`.
std::string encode_greeting(std::string_view nonce);

/// Decodes a request body; throws protocol_error on anything malformed.
request decode_request(std::string_view body);

std::string encode_set(std::string_view key, std::string_view value);
std::string encode_get(std::string_view key);
std::string encode_add(std::string_view key, int64_t delta);
std::string encode_wait(const std::vector<std::string>& keys,
                        int64_t timeout_ms);
std::string encode_remove(std::string_view key);
std::string encode_compare_set(std::string_view key,
                               const std::optional<std::string>& expected,
                               std::string_view desired);
std::string encode_list(std::string_view prefix, bool with_values);
std::string encode_set_with_lease(std::string_view key, std::string_view value,
                                  int64_t ttl_ms);
std::string encode_renew(std::string_view key, int64_t ttl_ms);
std::string encode_hello(std::string_view client_nonce);

/// nonce_size random bytes (OpenSSL's generator); throws std::runtime_error
/// when it fails.
std::string random_nonce();
std::string encode_set_many(const std::vector<std::pair<std::string, std::string>>& entries);

} // namespace troupe::elastic::protocol
