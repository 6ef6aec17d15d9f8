#include "actors/timeline_writer.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(timeline_writer, file_is_complete_json_after_every_event) {
  const std::string path = ::testing::TempDir() + "timeline_writer_test.json";
  timeline_writer w{path};
  EXPECT_EQ(slurp(path), "[\n]");
  w.event("grad \"w\"", 'B', "NEGOTIATE_ALLREDUCE", 10);
  EXPECT_EQ(slurp(path),
            "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": "
            "\"grad \\\"w\\\"\"}},\n{\"name\": \"NEGOTIATE_ALLREDUCE\", \"ph\": \"B\", \"ts\": "
            "10, \"pid\": 1, \"tid\": 1}\n]");
  w.event("grad \"w\"", 'E', "NEGOTIATE_ALLREDUCE", 12);
  const auto text = slurp(path);
  EXPECT_EQ(text.back(), ']');
  EXPECT_EQ(text.find("process_name", text.find("process_name") + 1), std::string::npos);
  std::remove(path.c_str());
}

TEST(timeline_writer, unwritable_path_is_a_clear_error) {
  try {
    timeline_writer w{"/nonexistent-dir/t.json"};
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/t.json"), std::string::npos);
  }
}

} // namespace
} // namespace troupe::actors
