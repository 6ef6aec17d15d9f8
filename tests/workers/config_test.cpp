#include "workers/config.hpp"
#include "workers/identity.hpp"

#include <map>

#include <gtest/gtest.h>

namespace troupe::workers {
namespace {

env_lookup fake_env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end())
      return std::nullopt;
    return it->second;
  };
}

TEST(config, defaults_without_environment) {
  auto cfg = config_from_env(fake_env({}));
  EXPECT_DOUBLE_EQ(cfg.heartbeat_timeout_seconds, 5.0);
  EXPECT_DOUBLE_EQ(cfg.gloo_timeout_seconds, 30.0);
  EXPECT_EQ(cfg.scheduler_threads, 2);
  EXPECT_EQ(cfg.log_level, "warning");
}

TEST(config, horovod_alias_and_troupe_precedence) {
  auto cfg = config_from_env(fake_env({{"HOROVOD_GLOO_TIMEOUT_SECONDS", "12"},
                                       {"HOROVOD_LOG_LEVEL", "INFO"},
                                       {"TROUPE_LOG_LEVEL", "debug"}}));
  EXPECT_DOUBLE_EQ(cfg.gloo_timeout_seconds, 12.0);
  EXPECT_EQ(cfg.log_level, "debug");
}

TEST(config, bad_value_names_the_variable) {
  try {
    config_from_env(fake_env({{"TROUPE_HEARTBEAT_TIMEOUT_SECONDS", "soon"}}));
    FAIL() << "expected config_error";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "TROUPE_HEARTBEAT_TIMEOUT_SECONDS='soon' is not a positive number");
  }
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_SCHEDULER_THREADS", "1.5"}})),
               config_error);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_LOG_LEVEL", "loud"}})), config_error);
}

TEST(config, metrics_port_is_off_unless_set) {
  EXPECT_EQ(config_from_env(fake_env({})).metrics_port, 0);
  EXPECT_EQ(config_from_env(fake_env({})).metrics_address, "127.0.0.1");
  EXPECT_EQ(config_from_env(fake_env({{"TROUPE_METRICS_PORT", "9100"}})).metrics_port, 9100);
  EXPECT_EQ(config_from_env(fake_env({{"TROUPE_METRICS_PORT", "0"}})).metrics_port, 0);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_METRICS_PORT", "70000"}})), config_error);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_METRICS_PORT", "http"}})), config_error);
}

TEST(config, every_knob_has_env_flag_and_help) {
  for (const auto& k : knobs()) {
    EXPECT_EQ(std::string(k.env).rfind("TROUPE_", 0), 0u);
    EXPECT_NE(std::string(k.flag), "");
    EXPECT_NE(std::string(k.help), "");
  }
  EXPECT_NE(describe(config{}).find("TROUPE_GLOO_TIMEOUT_SECONDS=30"), std::string::npos);
}

TEST(identity, single_rank_without_launcher) {
  auto id = identity_from_env(fake_env({}));
  EXPECT_EQ(id.rank, 0);
  EXPECT_EQ(id.size, 1);
  EXPECT_FALSE(id.has_store());
}

TEST(identity, launcher_environment) {
  auto id = identity_from_env(fake_env({{"TROUPE_RANK", "2"},
                                        {"TROUPE_SIZE", "4"},
                                        {"TROUPE_LOCAL_RANK", "0"},
                                        {"TROUPE_LOCAL_SIZE", "2"},
                                        {"TROUPE_CROSS_RANK", "1"},
                                        {"TROUPE_CROSS_SIZE", "2"},
                                        {"TROUPE_STORE_ADDR", "127.0.0.1"},
                                        {"TROUPE_STORE_PORT", "4242"},
                                        {"TROUPE_JOB_ID", "abc"}}));
  EXPECT_EQ(id.rank, 2);
  EXPECT_EQ(id.size, 4);
  EXPECT_EQ(id.local_size, 2);
  EXPECT_EQ(id.cross_rank, 1);
  EXPECT_EQ(id.store_port, 4242);
  EXPECT_EQ(id.job_id, "abc");
}

TEST(identity, horovod_names_are_accepted) {
  auto id = identity_from_env(fake_env({{"HOROVOD_RANK", "1"},
                                        {"HOROVOD_SIZE", "2"},
                                        {"TROUPE_STORE_ADDR", "h"},
                                        {"TROUPE_STORE_PORT", "1"}}));
  EXPECT_EQ(id.rank, 1);
  EXPECT_EQ(id.size, 2);
}

TEST(identity, inconsistent_values_are_rejected) {
  EXPECT_THROW(identity_from_env(fake_env({{"TROUPE_RANK", "3"}, {"TROUPE_SIZE", "2"}})),
               config_error);
  EXPECT_THROW(identity_from_env(fake_env({{"TROUPE_SIZE", "x"}})), config_error);
  // Several ranks but nowhere to rendezvous.
  EXPECT_THROW(identity_from_env(fake_env({{"TROUPE_RANK", "0"}, {"TROUPE_SIZE", "2"}})),
               config_error);
}

} // namespace
} // namespace troupe::workers
