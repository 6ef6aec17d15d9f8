#include "elastic/launcher/worker_env.hpp"

#include <gtest/gtest.h>

#include <map>

using namespace troupe::elastic::launcher;

namespace {

std::map<std::string, std::string>
as_map(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const auto& entry : env) {
    auto eq = entry.find('=');
    EXPECT_EQ(out.count(entry.substr(0, eq)), 0u) << "duplicate " << entry;
    out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

} // namespace

TEST(worker_env, exports_identity_under_all_names) {
  auto ranks = plan_ranks(parse_host_list("a:2,b:2"), 4);
  job_env job;
  job.size = 4;
  job.store.host = "127.0.0.1";
  job.store.port = 4242;
  job.job_id = "00ff";
  job.secret_fd = 7;
  job.knobs = {{"TROUPE_LOG_LEVEL", "debug"}};
  auto env = as_map(merge_environment({"PATH=/bin", "RANK=99", "HOME=/root"},
                                      rank_variables(ranks[3], job)));
  EXPECT_EQ(env["PATH"], "/bin");
  EXPECT_EQ(env["HOME"], "/root");
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["TROUPE_RANK"], "3");
  EXPECT_EQ(env["HOROVOD_RANK"], "3");
  EXPECT_EQ(env["TROUPE_SIZE"], "4");
  EXPECT_EQ(env["HOROVOD_SIZE"], "4");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["TROUPE_LOCAL_RANK"], "1");
  EXPECT_EQ(env["HOROVOD_LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["TROUPE_LOCAL_SIZE"], "2");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["TROUPE_CROSS_RANK"], "1");
  EXPECT_EQ(env["HOROVOD_CROSS_SIZE"], "2");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["TROUPE_HOSTNAME"], "b");
  EXPECT_EQ(env["HOROVOD_HOSTNAME"], "b");
  EXPECT_EQ(env["TROUPE_MACHINE_LOCAL_RANK"], "1");
  EXPECT_EQ(env["TROUPE_STORE_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["TROUPE_STORE_PORT"], "4242");
  EXPECT_EQ(env["TROUPE_JOB_ID"], "00ff");
  EXPECT_EQ(env["TROUPE_SECRET_FD"], "7");
  EXPECT_EQ(env["TROUPE_LOG_LEVEL"], "debug");
  EXPECT_EQ(env["PYTHONUNBUFFERED"], "1");
  EXPECT_EQ(env.count("TROUPE_RENDEZVOUS"), 0u);
}

TEST(worker_env, names_an_etcd_rendezvous_instead_of_the_store_address) {
  auto ranks = plan_ranks(parse_host_list("a:1"), 1);
  job_env job;
  job.size = 1;
  job.store = troupe::elastic::parse_rendezvous("etcd://[::1]:2379/jobs/");
  auto env = as_map(merge_environment({}, rank_variables(ranks[0], job)));
  EXPECT_EQ(env["TROUPE_RENDEZVOUS"], "etcd://[::1]:2379/jobs/");
  EXPECT_EQ(env.count("TROUPE_STORE_ADDR") + env.count("TROUPE_STORE_PORT"), 0u);
}

TEST(worker_env, job_ids_are_random_hex) {
  auto a = random_job_id();
  auto b = random_job_id();
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

TEST(worker_env, nccl_host_ids_are_distinct_per_rank_and_only_when_given) {
  auto ranks = plan_ranks(parse_host_list("a:2"), 2);
  job_env job;
  job.size = 2;
  job.job_id = "00ff";
  EXPECT_EQ(as_map(merge_environment({}, rank_variables(ranks[0], job))).count("NCCL_HOSTID"),
            0u);
  job.nccl_host_id_per_rank = true;
  auto first = as_map(merge_environment({}, rank_variables(ranks[0], job)));
  auto second = as_map(merge_environment({}, rank_variables(ranks[1], job)));
  EXPECT_EQ(first["NCCL_HOSTID"], "00ff-0");
  EXPECT_EQ(second["NCCL_HOSTID"], "00ff-1");
  // An elastic worker's id replaces its rank, appended after the rank's.
  auto vars = rank_variables(ranks[1], job);
  vars.push_back(nccl_host_id(job, 7));
  EXPECT_EQ(as_map(merge_environment({}, vars))["NCCL_HOSTID"], "00ff-7");
}

TEST(worker_env, a_users_nccl_host_id_is_kept) {
  EXPECT_TRUE(gives_nccl_host_ids(true, {"PATH=/bin", "NCCL_HOSTIDS=x"}));
  EXPECT_FALSE(gives_nccl_host_ids(true, {"PATH=/bin", "NCCL_HOSTID=mine"}));
  EXPECT_FALSE(gives_nccl_host_ids(false, {"PATH=/bin"}));
}
