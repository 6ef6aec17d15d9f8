#include "elastic/store_protocol.hpp"

#include <gtest/gtest.h>

using namespace troupe::elastic::protocol;

namespace {

request round_trip(const std::string& frame) {
  auto size = frame_size(frame);
  EXPECT_EQ(size, frame.size());
  return decode_request(std::string_view{frame}.substr(header_size));
}

} // namespace

TEST(store_protocol, requests_round_trip) {
  auto set = round_trip(encode_set("k", std::string("v\0w", 3)));
  EXPECT_EQ(set.kind, op::set);
  EXPECT_EQ(set.key, "k");
  EXPECT_EQ(set.value, std::string("v\0w", 3));
  auto add = round_trip(encode_add("n", -42));
  EXPECT_EQ(add.kind, op::add);
  EXPECT_EQ(add.delta, -42);
  auto wait = round_trip(encode_wait({"a", "", "c"}, 1234));
  EXPECT_EQ(wait.kind, op::wait);
  EXPECT_EQ(wait.keys, (std::vector<std::string>{"a", "", "c"}));
  EXPECT_EQ(wait.timeout_ms, 1234);
  EXPECT_EQ(round_trip(encode_get("g")).key, "g");
}

TEST(store_protocol, new_requests_round_trip) {
  auto remove = round_trip(encode_remove("r"));
  EXPECT_EQ(remove.kind, op::remove);
  EXPECT_EQ(remove.key, "r");
  auto create = round_trip(encode_compare_set("k", std::nullopt, "d"));
  EXPECT_EQ(create.kind, op::compare_set);
  EXPECT_EQ(create.expected, std::nullopt);
  EXPECT_EQ(create.value, "d");
  // An empty expected value is not the absent key.
  auto swap = round_trip(encode_compare_set("k", std::string(), "d"));
  EXPECT_EQ(swap.expected, std::string());
  auto list = round_trip(encode_list("p/", true));
  EXPECT_EQ(list.kind, op::list);
  EXPECT_EQ(list.key, "p/");
  EXPECT_TRUE(list.with_values);
  EXPECT_FALSE(round_trip(encode_list("p/", false)).with_values);
  auto lease = round_trip(encode_set_with_lease("k", "v", 250));
  EXPECT_EQ(lease.kind, op::set_with_lease);
  EXPECT_EQ(lease.value, "v");
  EXPECT_EQ(lease.ttl_ms, 250);
  auto renew = round_trip(encode_renew("k", -1));
  EXPECT_EQ(renew.kind, op::renew);
  EXPECT_EQ(renew.ttl_ms, -1);
  auto many = round_trip(encode_set_many({{"a", "1"}, {"b", ""}}));
  EXPECT_EQ(many.kind, op::set_many);
  EXPECT_EQ(many.keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(many.values, (std::vector<std::string>{"1", ""}));
  EXPECT_TRUE(round_trip(encode_set_many({})).keys.empty());
}

TEST(store_protocol, new_requests_reject_bad_fields) {
  auto body = [](const frame_writer& out) {
    return out.finish().substr(header_size);
  };
  // Flags are 0 or 1 only.
  EXPECT_THROW(
    decode_request(body(frame_writer{}.u8(6).bytes("k").u8(2).bytes("d"))),
    protocol_error);
  EXPECT_THROW(decode_request(body(frame_writer{}.u8(7).bytes("p").u8(9))),
               protocol_error);
  // Every truncation and every trailing byte is refused.
  for (const auto& frame :
       {encode_remove("k"), encode_compare_set("k", std::string("e"), "d"),
        encode_list("p", true), encode_set_with_lease("k", "v", 5),
        encode_renew("k", 5), encode_set_many({{"k", "v"}, {"l", "w"}})}) {
    auto whole = frame.substr(header_size);
    for (size_t n = 0; n < whole.size(); ++n)
      EXPECT_THROW(decode_request(whole.substr(0, n)), protocol_error)
        << int(whole[0]) << " cut at " << n;
    EXPECT_THROW(decode_request(whole + '\0'), protocol_error)
      << int(whole[0]);
  }
}

TEST(store_protocol, a_key_count_beyond_the_limit_is_refused_before_decoding_keys) {
  auto body = [](const frame_writer& out) {
    return out.finish().substr(header_size);
  };
  // The largest frame of empty keys: 16 million of them.
  const uint32_t empties = (max_body_size - 16) / 4;
  std::string keys(static_cast<size_t>(empties) * 4, '\0');
  for (uint8_t kind : {uint8_t{4}, uint8_t{11}}) {  // wait, set_many
    auto frame = body(frame_writer{}.u8(kind).u32(empties)) + keys;
    try {
      decode_request(frame);
      FAIL() << "op " << int(kind) << " decoded " << empties << " keys";
    } catch (const protocol_error& e) {
      EXPECT_NE(std::string(e.what()).find("keys (at most 1048576)"), std::string::npos)
        << e.what();
    }
  }
}

TEST(store_protocol, frame_size_waits_for_complete_frames) {
  auto frame = encode_get("key");
  for (size_t n = 0; n < frame.size(); ++n)
    EXPECT_EQ(frame_size(std::string_view{frame}.substr(0, n)), 0u) << n;
  EXPECT_EQ(frame_size(frame + "extra"), frame.size());
}

TEST(store_protocol, malformed_input_is_rejected) {
  EXPECT_THROW(frame_size(std::string("\xff\xff\xff\xff", 4)), protocol_error);
  EXPECT_THROW(decode_request(""), protocol_error);
  EXPECT_THROW(decode_request(std::string(1, '\x63')), protocol_error);
  auto get = encode_get("key");
  auto body = get.substr(header_size);
  EXPECT_THROW(decode_request(body.substr(0, body.size() - 1)),
               protocol_error);
  EXPECT_THROW(decode_request(body + "x"), protocol_error);
}
