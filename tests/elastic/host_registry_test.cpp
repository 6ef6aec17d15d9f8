#include "elastic/launcher/host_registry.hpp"

#include <gtest/gtest.h>

using namespace troupe::elastic::launcher;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> names(const std::vector<host_spec>& hosts) {
  std::vector<std::string> out;
  for (const auto& h : hosts)
    out.push_back(h.name);
  return out;
}

} // namespace

TEST(host_registry, keeps_age_order_across_updates) {
  host_registry r{std::nullopt};
  const auto now = host_registry::clock::now();
  r.update({{"a", 1}, {"b", 1}});
  r.update({{"c", 1}, {"b", 2}});
  EXPECT_EQ(names(r.usable(now)), (std::vector<std::string>{"b", "c"}));
  r.update({{"c", 1}, {"a", 1}, {"b", 2}});
  EXPECT_EQ(names(r.usable(now)), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r.usable(now)[1].slots, 2);
}

TEST(host_registry, without_cooldown_a_failed_host_stays_out) {
  host_registry r{std::nullopt};
  const auto now = host_registry::clock::now();
  r.update({{"a", 1}, {"b", 1}});
  r.blacklist("a", now);
  EXPECT_EQ(names(r.usable(now + 10000s)), (std::vector<std::string>{"b"}));
  EXPECT_FALSE(r.all_blacklisted_for_good());
  r.blacklist("b", now);
  EXPECT_TRUE(r.all_blacklisted_for_good());
  EXPECT_EQ(r.count(now).blacklisted, 2);
}

TEST(host_registry, cooldown_follows_horovods_formula) {
  // min 10, max 100: first failure 10 * 2 + U(0,1) * 10 in [20, 30] s,
  // second 10 * 4 + ... in [40, 50] s.
  host_registry r{cooldown_range{10, 100}, 42};
  auto now = host_registry::clock::now();
  r.update({{"a", 1}});
  r.blacklist("a", now);
  EXPECT_TRUE(r.usable(now + 19s).empty());
  EXPECT_EQ(r.count(now + 19s).cooling_down, 1);
  EXPECT_EQ(r.usable(now + 31s).size(), 1u);
  auto end = r.next_cooldown_end(now);
  ASSERT_TRUE(end);
  EXPECT_GE(*end - now, 20s);
  EXPECT_LE(*end - now, 30s);
  r.blacklist("a", now + 5s);  // during the cooldown: not extended
  EXPECT_EQ(r.next_cooldown_end(now), end);
  now += 31s;
  r.blacklist("a", now);
  EXPECT_TRUE(r.usable(now + 39s).empty());
  EXPECT_EQ(r.usable(now + 51s).size(), 1u);
  // Clamped to the range's top.
  host_registry capped{cooldown_range{10, 12}, 1};
  capped.update({{"a", 1}});
  capped.blacklist("a", now);
  EXPECT_EQ(capped.usable(now + 13s).size(), 1u);
}
