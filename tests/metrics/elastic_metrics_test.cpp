#include "metrics/elastic_metrics.hpp"

#include <gtest/gtest.h>

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace troupe::metrics {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(elastic_metrics, follow_the_driver) {
  prometheus::Registry registry;
  elastic_metrics m{registry};
  auto text = prometheus::TextSerializer{}.Serialize(registry.Collect());
  // Every series exists from the start, so rate() works from the first scrape.
  EXPECT_TRUE(has_line(text, "troupe_elastic_epoch -1")) << text;
  EXPECT_TRUE(has_line(text, "troupe_elastic_resets_total{reason=\"hosts_updated\"} 0")) << text;
  m.epoch(3, 2);
  m.reset("failure");
  m.reset("failure");
  m.barrier_seconds(0.03);
  m.hosts(2, 1, 0);
  text = prometheus::TextSerializer{}.Serialize(registry.Collect());
  EXPECT_TRUE(has_line(text, "troupe_elastic_epoch 3")) << text;
  EXPECT_TRUE(has_line(text, "troupe_elastic_members 2")) << text;
  EXPECT_TRUE(has_line(text, "troupe_elastic_resets_total{reason=\"failure\"} 2")) << text;
  EXPECT_TRUE(has_line(text, "troupe_elastic_hosts{state=\"blacklisted\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "troupe_elastic_reset_barrier_seconds_count 1")) << text;
  EXPECT_TRUE(has_line(text, "troupe_elastic_reset_barrier_seconds_bucket{le=\"0.05\"} 1")) << text;
}

} // namespace
} // namespace troupe::metrics
