#include "backends/thread_affinity.hpp"
#include "ipc/process_alive.hpp"
#include "workers/config.hpp"
#include "workers/identity.hpp"
#include "workers/wait_spin.hpp"

#include <sched.h>

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

TEST(config, wait_spin_is_auto_unless_set) {
  EXPECT_EQ(config_from_env(fake_env({})).wait_spin_us, -1);
  EXPECT_EQ(config_from_env(fake_env({{"TROUPE_WAIT_SPIN_US", "auto"}})).wait_spin_us, -1);
  EXPECT_EQ(config_from_env(fake_env({{"TROUPE_WAIT_SPIN_US", "0"}})).wait_spin_us, 0);
  EXPECT_EQ(config_from_env(fake_env({{"TROUPE_WAIT_SPIN_US", "250"}})).wait_spin_us, 250);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_WAIT_SPIN_US", "-5"}})), config_error);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_WAIT_SPIN_US", "fast"}})), config_error);
}

TEST(wait_spin, a_set_value_wins_and_auto_yields_only_with_two_cpus_per_rank) {
  using us = std::chrono::microseconds;
  const int cpus = backends::usable_cpus();
  ASSERT_GE(cpus, 1);
  EXPECT_EQ(wait_spin(0, 1, cpus), us(0));
  EXPECT_EQ(wait_spin(250, 64, cpus), us(250));
  EXPECT_EQ(wait_spin(-1, 1, cpus), cpus >= 2 ? us(100) : us(0));
  EXPECT_EQ(wait_spin(-1, cpus, cpus), us(0));  // one CPU per rank
  EXPECT_EQ(wait_spin(-1, (cpus + 1) / 2, cpus), cpus % 2 == 0 ? us(100) : us(0));
}

TEST(config, gpu_operations_take_horovods_name_and_refuse_other_libraries) {
  EXPECT_EQ(config_from_env(fake_env({})).gpu_operations, "");
  EXPECT_EQ(config_from_env(fake_env({{"HOROVOD_GPU_OPERATIONS", "NCCL"}})).gpu_operations,
            "nccl");
  EXPECT_EQ(config_from_env(fake_env({{"TROUPE_GPU_OPERATIONS", "gloo"},
                                      {"HOROVOD_GPU_OPERATIONS", "nccl"}}))
              .gpu_operations,
            "gloo");
  try {
    config_from_env(fake_env({{"TROUPE_GPU_OPERATIONS", "ccl"}}));
    FAIL() << "expected config_error";
  } catch (const config_error& e) {
    EXPECT_STREQ(e.what(), "TROUPE_GPU_OPERATIONS='ccl' is not nccl, gloo or mpi");
  }
}

TEST(config, hierarchical_and_nccl_host_id_switches_take_horovods_names) {
  const auto off = config_from_env(fake_env({}));
  EXPECT_FALSE(off.hierarchical_allreduce);
  EXPECT_FALSE(off.hierarchical_allgather);
  EXPECT_FALSE(off.nccl_host_id_per_rank);
  const auto on = config_from_env(fake_env({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
                                            {"HOROVOD_HIERARCHICAL_ALLGATHER", "1"},
                                            {"TROUPE_NCCL_HOSTID_PER_RANK", "1"}}));
  EXPECT_TRUE(on.hierarchical_allreduce);
  EXPECT_TRUE(on.hierarchical_allgather);
  EXPECT_TRUE(on.nccl_host_id_per_rank);
  EXPECT_FALSE(config_from_env(fake_env({{"TROUPE_HIERARCHICAL_ALLREDUCE", "0"},
                                         {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}}))
                 .hierarchical_allreduce);
  try {
    config_from_env(fake_env({{"TROUPE_HIERARCHICAL_ALLGATHER", "yes"}}));
    FAIL() << "expected config_error";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()), "TROUPE_HIERARCHICAL_ALLGATHER='yes' is not 0 or 1");
  }
  // troupe-run's flags take no value, as horovodrun's.
  for (const auto& k : knobs()) {
    if (std::string(k.env) == "TROUPE_HIERARCHICAL_ALLREDUCE" ||
        std::string(k.env) == "TROUPE_HIERARCHICAL_ALLGATHER" ||
        std::string(k.env) == "TROUPE_NCCL_HOSTID_PER_RANK") {
      EXPECT_STREQ(k.flag_value, "1") << k.env;
    }
  }
}

TEST(config, thread_affinity_is_a_core_per_local_rank_under_horovods_name_too) {
  EXPECT_TRUE(config_from_env(fake_env({})).thread_affinity.empty());
  EXPECT_EQ(config_from_env(fake_env({{"HOROVOD_THREAD_AFFINITY", "3,0,12"}})).thread_affinity,
            (std::vector<int>{3, 0, 12}));
  EXPECT_EQ(config_from_env(fake_env({{"TROUPE_THREAD_AFFINITY", "1"}})).thread_affinity,
            (std::vector<int>{1}));
  EXPECT_NE(describe(config_from_env(fake_env({{"TROUPE_THREAD_AFFINITY", "1,0"}})))
              .find("TROUPE_THREAD_AFFINITY=1,0"),
            std::string::npos);
  for (const char* bad : {"1,,2", "a", "-1", "1,", ",1", "1 2", "1234567"}) {
    try {
      config_from_env(fake_env({{"TROUPE_THREAD_AFFINITY", bad}}));
      ADD_FAILURE() << bad << " was taken";
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find("TROUPE_THREAD_AFFINITY"), std::string::npos) << bad;
    }
  }
}

TEST(config, metrics_port_is_off_unless_set) {
  EXPECT_EQ(config_from_env(fake_env({})).metrics_port, 0);
  EXPECT_EQ(config_from_env(fake_env({})).metrics_address, "127.0.0.1");
  EXPECT_EQ(config_from_env(fake_env({{"TROUPE_METRICS_PORT", "9100"}})).metrics_port, 9100);
  EXPECT_EQ(config_from_env(fake_env({{"TROUPE_METRICS_PORT", "0"}})).metrics_port, 0);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_METRICS_PORT", "70000"}})), config_error);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_METRICS_PORT", "http"}})), config_error);
}

TEST(config, autotune_knobs_take_horovods_names_and_record_what_was_set) {
  auto c = config_from_env(fake_env({}));
  EXPECT_FALSE(c.autotune);
  EXPECT_EQ(c.autotune_warmup_samples, 3);
  EXPECT_EQ(c.autotune_steps_per_sample, 10);
  EXPECT_EQ(c.autotune_bayes_opt_max_samples, 20);
  EXPECT_EQ(c.autotune_gaussian_process_noise, 0.8);
  EXPECT_FALSE(c.is_explicit("TROUPE_FUSION_THRESHOLD"));
  c = config_from_env(fake_env({{"HOROVOD_AUTOTUNE", "1"},
                                {"HOROVOD_AUTOTUNE_LOG", "t.csv"},
                                {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "0"},
                                {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "4"},
                                {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "7"},
                                {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0"},
                                {"HOROVOD_FUSION_THRESHOLD", "1048576"}}));
  EXPECT_TRUE(c.autotune);
  EXPECT_EQ(c.autotune_log, "t.csv");
  EXPECT_EQ(c.autotune_warmup_samples, 0);
  EXPECT_EQ(c.autotune_steps_per_sample, 4);
  EXPECT_EQ(c.autotune_bayes_opt_max_samples, 7);
  EXPECT_EQ(c.autotune_gaussian_process_noise, 0.0);
  EXPECT_TRUE(c.is_explicit("TROUPE_FUSION_THRESHOLD"));
  EXPECT_FALSE(c.is_explicit("TROUPE_CYCLE_TIME"));
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_AUTOTUNE", "yes"}})), config_error);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_AUTOTUNE_STEPS_PER_SAMPLE", "0"}})),
               config_error);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "-1"}})),
               config_error);
}

TEST(config, every_knob_has_env_flag_and_help) {
  for (const auto& k : knobs()) {
    EXPECT_EQ(std::string(k.env).rfind("TROUPE_", 0), 0u);
    // Only the secret has no flag: a command line is visible to every user.
    EXPECT_EQ(k.flag == nullptr, std::string(k.env) == "TROUPE_SECRET_KEY");
    if (k.flag) {
      EXPECT_NE(std::string(k.flag), "");
    }
    EXPECT_NE(std::string(k.help), "");
  }
  EXPECT_NE(describe(config{}).find("TROUPE_GLOO_TIMEOUT_SECONDS=30"), std::string::npos);
}

TEST(config, security_knobs) {
  const std::string secret = "0123456789abcdef-secret";
  auto cfg = config_from_env(fake_env({{"HOROVOD_SECRET_KEY", secret}}));
  EXPECT_EQ(cfg.secret_key, secret);
  // The start-up log line says whether a secret is set, never what it is.
  EXPECT_EQ(describe(cfg).find(secret), std::string::npos);
  EXPECT_NE(describe(cfg).find("TROUPE_SECRET_KEY=set"), std::string::npos);
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_SECRET_KEY", "short"}})), config_error);
  EXPECT_EQ(config_from_env(fake_env({{"HOROVOD_GLOO_IFACE", "eth1"}})).network_interface,
            "eth1");
  EXPECT_FALSE(config_from_env(fake_env({})).insecure_control_plane);
  EXPECT_TRUE(config_from_env(fake_env({{"TROUPE_INSECURE_CONTROL_PLANE", "1"}}))
                .insecure_control_plane);
  // User certificates come as a set of three.
  EXPECT_THROW(config_from_env(fake_env({{"TROUPE_TLS_CERTIFICATE", "/c.pem"}})), config_error);
  auto files = config_from_env(fake_env({{"TROUPE_TLS_CERTIFICATE", "/c.pem"},
                                         {"TROUPE_TLS_KEY", "/k.pem"},
                                         {"TROUPE_TLS_CAFILE", "/ca.pem"}}));
  EXPECT_EQ(files.tls_key, "/k.pem");
}

TEST(identity, single_rank_without_launcher) {
  auto id = identity_from_env(fake_env({}), {});
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
                                        {"TROUPE_JOB_ID", "abc"}}), {});
  EXPECT_EQ(id.rank, 2);
  EXPECT_EQ(id.size, 4);
  EXPECT_EQ(id.local_size, 2);
  EXPECT_EQ(id.cross_rank, 1);
  EXPECT_EQ(id.store.port, 4242);
  EXPECT_EQ(id.store.host, "127.0.0.1");
  EXPECT_EQ(id.job_id, "abc");
}

TEST(identity, horovod_names_are_accepted) {
  auto id = identity_from_env(fake_env({{"HOROVOD_RANK", "1"},
                                        {"HOROVOD_SIZE", "2"},
                                        {"TROUPE_STORE_ADDR", "h"},
                                        {"TROUPE_STORE_PORT", "1"}}), {});
  EXPECT_EQ(id.rank, 1);
  EXPECT_EQ(id.size, 2);
}

// The calling thread's CPUs, the first of them, and a mask of it alone.
struct cpu_masks {
  cpu_set_t all;
  int first = 0;
  cpu_set_t first_alone;
  cpu_masks() {
    CPU_ZERO(&all);
    sched_getaffinity(0, sizeof all, &all);
    while (first < CPU_SETSIZE - 1 && !CPU_ISSET(first, &all))
      ++first;
    CPU_ZERO(&first_alone);
    CPU_SET(first, &first_alone);
  }
};

// TROUPE_CPU counts only while the process runs on that CPU alone.
TEST(identity, own_core_needs_the_binding_it_names) {
  const cpu_masks masks;
  const cpu_set_t& before = masks.all;
  const int cpu = masks.first;
  const auto with_cpu = [](int c) {
    return identity_from_env(fake_env({{"TROUPE_CPU", std::to_string(c)}}), {});
  };
  if (CPU_COUNT(&before) > 1) {
    EXPECT_FALSE(with_cpu(cpu).own_core);  // not bound
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof masks.first_alone, &masks.first_alone), 0);
  const bool named = with_cpu(cpu).own_core;
  const bool other = with_cpu(cpu + 1).own_core;
  const bool unset = identity_from_env(fake_env({}), {}).own_core;
  ASSERT_EQ(sched_setaffinity(0, sizeof before, &before), 0);
  EXPECT_TRUE(named);
  EXPECT_FALSE(other);
  EXPECT_FALSE(unset);
}

// TROUPE_RUNTIME_CPU counts while the process may run on that CPU, and not
// beside a binding of the whole process (TROUPE_CPU).
TEST(identity, runtime_cpu_needs_a_cpu_the_process_may_use) {
  const cpu_masks masks;
  const cpu_set_t& mask = masks.all;
  const int cpu = masks.first;
  const auto with = [](std::map<std::string, std::string> vars) {
    return identity_from_env(fake_env(std::move(vars)), {});
  };
  const auto id = with({{"TROUPE_RUNTIME_CPU", std::to_string(cpu)}});
  EXPECT_EQ(id.runtime_cpu, cpu);
  EXPECT_TRUE(id.runtime_on_one_cpu());
  EXPECT_EQ(static_cast<int>(id.process_cpus.size()), CPU_COUNT(&mask));
  EXPECT_EQ(with({{"TROUPE_RUNTIME_CPU", std::to_string(CPU_SETSIZE + 1)}}).runtime_cpu, -1);
  EXPECT_EQ(with({}).runtime_cpu, -1);
  EXPECT_FALSE(with({}).runtime_on_one_cpu());
  ASSERT_EQ(sched_setaffinity(0, sizeof masks.first_alone, &masks.first_alone), 0);
  const auto bound = with({{"TROUPE_CPU", std::to_string(cpu)},
                           {"TROUPE_RUNTIME_CPU", std::to_string(cpu)}});
  ASSERT_EQ(sched_setaffinity(0, sizeof mask, &mask), 0);
  EXPECT_TRUE(bound.own_core);
  EXPECT_EQ(bound.runtime_cpu, -1);
}

// troupe-run's pid counts only where it means the same process: the same
// boot and pid namespace.
TEST(identity, launcher_pid_needs_the_launchers_pid_namespace) {
  const auto with = [](std::map<std::string, std::string> vars) {
    return identity_from_env(fake_env(std::move(vars)), {});
  };
  const auto here = troupe::ipc::pid_namespace();
  ASSERT_FALSE(here.empty());
  const auto id = with({{"TROUPE_LAUNCHER_PID", "4242"},
                        {"TROUPE_LAUNCHER_START", "777"},
                        {"TROUPE_LAUNCHER_NS", here}});
  EXPECT_EQ(id.launcher_pid, 4242);
  EXPECT_EQ(id.launcher_start, 777u);
  // Another namespace: not read at all, so not checked either.
  EXPECT_EQ(with({{"TROUPE_LAUNCHER_PID", "x"}, {"TROUPE_LAUNCHER_NS", here + "0"}})
              .launcher_pid,
            -1);
  EXPECT_EQ(with({{"TROUPE_LAUNCHER_PID", "4242"}, {"TROUPE_LAUNCHER_START", "777"}})
              .launcher_pid,
            -1);
  EXPECT_EQ(with({}).launcher_pid, -1);
  // Troupe-run's own variables: no HOROVOD_ names.
  EXPECT_EQ(with({{"HOROVOD_LAUNCHER_PID", "4242"}, {"HOROVOD_LAUNCHER_START", "777"},
                  {"HOROVOD_LAUNCHER_NS", here}})
              .launcher_pid,
            -1);
  for (const auto* bad : {"x", "0", "-5", "99999999999"})
    EXPECT_THROW(with({{"TROUPE_LAUNCHER_PID", bad},
                       {"TROUPE_LAUNCHER_START", "777"},
                       {"TROUPE_LAUNCHER_NS", here}}),
                 config_error)
      << bad;
  EXPECT_THROW(with({{"TROUPE_LAUNCHER_PID", "4242"}, {"TROUPE_LAUNCHER_NS", here}}),
               config_error);
}

TEST(identity, inconsistent_values_are_rejected) {
  EXPECT_THROW(identity_from_env(fake_env({{"TROUPE_RANK", "3"}, {"TROUPE_SIZE", "2"}}), {}),
               config_error);
  EXPECT_THROW(identity_from_env(fake_env({{"TROUPE_SIZE", "x"}}), {}), config_error);
  // Several ranks but nowhere to rendezvous.
  EXPECT_THROW(identity_from_env(fake_env({{"TROUPE_RANK", "0"}, {"TROUPE_SIZE", "2"}}), {}),
               config_error);
}

} // namespace
} // namespace troupe::workers
