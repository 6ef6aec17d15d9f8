#include "elastic/launcher/line_forwarder.hpp"

#include <gtest/gtest.h>

#include <vector>

using troupe::elastic::launcher::line_forwarder;

namespace {

struct capture {
  std::vector<std::string> lines;
  line_forwarder make(int rank, const char* stream) {
    return line_forwarder{rank, stream,
                          [this](std::string_view s) { lines.emplace_back(s); }};
  }
};

} // namespace

TEST(line_forwarder, tags_each_line_like_horovodrun) {
  capture out;
  auto fwd = out.make(3, "stdout");
  fwd.feed("hello\nworld\n");
  EXPECT_EQ(out.lines, (std::vector<std::string>{"[3]<stdout>:hello\n",
                                                 "[3]<stdout>:world\n"}));
}

TEST(line_forwarder, joins_lines_split_across_reads) {
  capture out;
  auto fwd = out.make(0, "stderr");
  fwd.feed("par");
  fwd.feed("tial");
  EXPECT_TRUE(out.lines.empty());
  fwd.feed(" line\n\nnext");
  EXPECT_EQ(out.lines, (std::vector<std::string>{"[0]<stderr>:partial line\n",
                                                 "[0]<stderr>:\n"}));
  fwd.finish();
  EXPECT_EQ(out.lines.back(), "[0]<stderr>:next\n");
  fwd.finish();
  EXPECT_EQ(out.lines.size(), 3u);
}

TEST(line_forwarder, cuts_endless_lines) {
  capture out;
  auto fwd = out.make(1, "stdout");
  std::string chunk(300000, 'x');
  for (int i = 0; i < 4; ++i)
    fwd.feed(chunk);
  ASSERT_EQ(out.lines.size(), 1u);
  EXPECT_EQ(out.lines[0].size(), std::string("[1]<stdout>:\n").size() + 1200000);
}
