#include "metrics/registry.hpp"

#include <cmath>
#include <thread>

#include <gtest/gtest.h>

namespace troupe::metrics {
namespace {

TEST(exposition, help_and_type_once_per_family_before_its_samples) {
  registry reg;
  auto& ops = reg.add_counter("x_ops_total", "Operations.", {"op"});
  ops.with({"allreduce"}).inc(3);
  ops.with({"broadcast"}).inc();
  reg.add_gauge("x_depth", "Depth.").with().set(-2);
  const auto text = reg.expose();
  EXPECT_EQ(text,
            "# HELP x_ops_total Operations.\n"
            "# TYPE x_ops_total counter\n"
            "x_ops_total{op=\"allreduce\"} 3\n"
            "x_ops_total{op=\"broadcast\"} 1\n"
            "# HELP x_depth Depth.\n"
            "# TYPE x_depth gauge\n"
            "x_depth -2\n");
  EXPECT_EQ(text.back(), '\n');
}

TEST(exposition, escapes_label_values_and_help) {
  registry reg;
  reg.add_counter("x_total", "Back\\slash and\nnewline; \"quotes\" stay.", {"path"})
    .with({"a\\b\"c\nd"})
    .inc();
  const auto text = reg.expose();
  EXPECT_NE(text.find("# HELP x_total Back\\\\slash and\\nnewline; \"quotes\" stay.\n"),
            std::string::npos)
    << text;
  EXPECT_NE(text.find("x_total{path=\"a\\\\b\\\"c\\nd\"} 1\n"), std::string::npos) << text;
}

TEST(exposition, counter_names_end_in_total_and_names_are_checked) {
  registry reg;
  EXPECT_THROW(reg.add_counter("x_ops", "no suffix"), std::invalid_argument);
  EXPECT_THROW(reg.add_gauge("9lives", "bad start"), std::invalid_argument);
  EXPECT_THROW(reg.add_gauge("x:y", "colons are for recording rules"), std::invalid_argument);
  EXPECT_THROW(reg.add_gauge("__x", "reserved"), std::invalid_argument);
  EXPECT_THROW(reg.add_gauge("x", "le is the histogram's", {"le"}), std::invalid_argument);
  EXPECT_THROW(reg.add_gauge("x", "repeated", {"a", "a"}), std::invalid_argument);
  EXPECT_THROW(reg.add_gauge("x", "bad label", {"a-b"}), std::invalid_argument);
  reg.add_histogram("lat_seconds", "h", {}, {1.0});
  EXPECT_THROW(reg.add_gauge("lat_seconds_count", "collides"), std::invalid_argument);
  EXPECT_THROW(reg.add_histogram("lat_seconds", "again", {}, {1.0}), std::invalid_argument);
  EXPECT_THROW(reg.add_histogram("h2", "unsorted", {}, {2.0, 1.0}), std::invalid_argument);
  auto& f = reg.add_counter("ok_total", "fine", {"a"});
  EXPECT_THROW(f.with({}), std::invalid_argument);
  EXPECT_EQ(&f.with({"v"}), &f.with({"v"}));  // registration returns the same child
}

// What promtool does not check: +Inf present, buckets cumulative and
// ascending, count == +Inf bucket, sum = sum of observations.
TEST(exposition, histogram_invariants) {
  registry reg;
  auto& h = reg.add_histogram("lat_seconds", "Latency.", {"op"}, {0.5, 1, 10}).with({"a"});
  for (double v : {0.25, 0.5, 0.75, 2.0, 2.0, 100.0})
    h.observe(v);
  const auto text = reg.expose();
  EXPECT_NE(text.find("lat_seconds_bucket{op=\"a\",le=\"0.5\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{op=\"a\",le=\"1\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_bucket{op=\"a\",le=\"10\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_bucket{op=\"a\",le=\"+Inf\"} 6\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_sum{op=\"a\"} 105.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_count{op=\"a\"} 6\n"), std::string::npos);
  const auto s = h.read();
  ASSERT_EQ(s.cumulative.size(), s.bounds.size() + 1);
  for (size_t i = 1; i < s.cumulative.size(); ++i)
    EXPECT_LE(s.cumulative[i - 1], s.cumulative[i]);
  EXPECT_EQ(s.count, s.cumulative.back());
}

TEST(exposition, histogram_edge_values) {
  histogram h{{1, 2}};
  h.observe(1);  // le is inclusive
  h.observe(std::nan(""));
  const auto s = h.read();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{1, 1, 2}));
  registry reg;
  reg.add_histogram("empty_bytes", "No observations yet.", {}, {64}).with();
  EXPECT_NE(reg.expose().find("empty_bytes_bucket{le=\"+Inf\"} 0\nempty_bytes_sum 0\n"
                              "empty_bytes_count 0\n"),
            std::string::npos);
}

TEST(exposition, values_are_go_style_floats) {
  std::string out;
  text::append_value(out, 1e-5);
  out += ' ';
  text::append_value(out, 1.0 / 0.0);
  out += ' ';
  text::append_value(out, -1.0 / 0.0);
  out += ' ';
  text::append_value(out, std::nan(""));
  out += ' ';
  text::append_value(out, 1048576);
  EXPECT_EQ(out, "1e-05 +Inf -Inf NaN 1048576");
}

TEST(exposition, concurrent_updates_sum_exactly) {
  registry reg;
  auto& c = reg.add_counter("hits_total", "h").with();
  auto& g = reg.add_gauge("level", "g").with();
  auto& h = reg.add_histogram("obs", "h", {}, {0.5}).with();
  constexpr int threads = 4, each = 100000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < each; ++i) {
        c.inc();
        g.inc(2);
        g.dec();
        h.observe(1);
      }
    });
  // Scraping meanwhile neither blocks nor corrupts the updates.
  for (int i = 0; i < 20; ++i)
    EXPECT_FALSE(reg.expose().empty());
  for (auto& t : pool)
    t.join();
  EXPECT_EQ(c.value(), uint64_t{threads * each});
  EXPECT_EQ(g.value(), int64_t{threads * each});
  const auto s = h.read();
  EXPECT_EQ(s.count, uint64_t{threads * each});
  EXPECT_DOUBLE_EQ(s.sum, double{threads * each});
}

} // namespace
} // namespace troupe::metrics
