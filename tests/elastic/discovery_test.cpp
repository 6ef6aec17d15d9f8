#include "elastic/launcher/discovery.hpp"

#include <gtest/gtest.h>

#include <chrono>

using namespace troupe::elastic::launcher;
using namespace std::chrono_literals;

TEST(discovery, parses_horovods_format) {
  auto hosts = parse_discovery_output("a:2\n\n  b  \na:5\n[::1]:3\n[fe80::1]\n", std::nullopt);
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].name, "a");
  EXPECT_EQ(hosts[0].slots, 2);  // the first line of a host counts
  EXPECT_EQ(hosts[1].name, "b");
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(hosts[2].name, "::1");
  EXPECT_EQ(hosts[2].slots, 3);
  EXPECT_EQ(hosts[3].name, "fe80::1");
  EXPECT_EQ(parse_discovery_output("c\n", 4).front().slots, 4);  // --slots-per-host
  EXPECT_TRUE(parse_discovery_output("\n \n", std::nullopt).empty());
}

TEST(discovery, rejects_malformed_lines_naming_them) {
  for (const char* bad : {"a:0", "a:x", "a:", "[::1", "[::1]x", ":2", "a b"}) {
    try {
      parse_discovery_output(std::string(bad) + "\n", std::nullopt);
      ADD_FAILURE() << bad;
    } catch (const plan_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
        << e.what();
    }
  }
}

namespace {

// The error parse_discovery_output gives for `text`, or "" when it accepts it.
std::string discovery_error(const std::string& text) {
  try {
    parse_discovery_output(text, std::nullopt);
  } catch (const plan_error& e) {
    return e.what();
  }
  return "";
}

} // namespace

// Found by fuzz.discovery_output (its corpus keeps the input as
// regression-carriage-return-in-name): a carriage return inside a line was
// taken as part of the host name.
TEST(discovery, rejects_control_bytes_in_host_names_and_shows_them_escaped) {
  EXPECT_EQ(discovery_error("ced\r:1\n"), "host discovery line 'ced\\x0d:1': not a host name");
  EXPECT_EQ(discovery_error("a\x01" "b\n"), "host discovery line 'a\\x01b': not a host name");
  EXPECT_EQ(discovery_error("h\x7f:2\n"), "host discovery line 'h\\x7f:2': not a host name");
  EXPECT_EQ(discovery_error("[::1\x02]\n"), "host discovery line '[::1\\x02]': not a host name");
  // Windows line ends around a line are still trimmed, not refused.
  EXPECT_EQ(parse_discovery_output("h:2\r\n", std::nullopt).front().slots, 2);
}

// ssh would read such a name as an option: "-oProxyCommand=..." runs a
// command on troupe-run's machine.
TEST(discovery, rejects_host_names_starting_with_a_dash) {
  EXPECT_EQ(discovery_error("-oProxyCommand=touch${IFS}x\n"),
            "host discovery line '-oProxyCommand=touch${IFS}x': not a host name (starts with "
            "'-')");
  EXPECT_EQ(discovery_error("a:1\n-x:2\n"),
            "host discovery line '-x:2': not a host name (starts with '-')");
  EXPECT_EQ(discovery_error("[-1]\n"), "host discovery line '[-1]': not a host name (starts with '-')");
  // Inside a name a dash is ordinary.
  EXPECT_EQ(parse_discovery_output("node-1:2\n", std::nullopt).front().name, "node-1");
}

TEST(discovery, runs_the_script_and_reports_failures) {
  std::atomic<bool> cancel{false};
  auto ok = run_discovery("printf 'h1:2\\nh2\\n'", std::nullopt, {}, 5s, cancel);
  ASSERT_TRUE(ok.ok) << ok.error;
  ASSERT_EQ(ok.hosts.size(), 2u);
  EXPECT_EQ(ok.hosts[0].slots, 2);
  auto failed = run_discovery("echo why >&2; exit 7", std::nullopt, {}, 5s, cancel);
  EXPECT_FALSE(failed.ok);
  EXPECT_EQ(failed.error, "host discovery script 'echo why >&2; exit 7' exited with status 7: why");
  auto malformed = run_discovery("echo h:zero", std::nullopt, {}, 5s, cancel);
  EXPECT_FALSE(malformed.ok);
  EXPECT_NE(malformed.error.find("'h:zero'"), std::string::npos) << malformed.error;
}

TEST(discovery, kills_a_hanging_script) {
  std::atomic<bool> cancel{false};
  const auto start = std::chrono::steady_clock::now();
  auto hung = run_discovery("sleep 30", std::nullopt, {}, 300ms, cancel);
  EXPECT_FALSE(hung.ok);
  EXPECT_EQ(hung.error, "host discovery script 'sleep 30' did not finish within 0.3 s "
                        "(--host-discovery-timeout); killed it");
  // Far below the script's own 30 s: it was killed, not waited for.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
}
