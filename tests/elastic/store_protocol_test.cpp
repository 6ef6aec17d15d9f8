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
