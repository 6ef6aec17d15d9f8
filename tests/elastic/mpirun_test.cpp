#include "elastic/launcher/mpirun.hpp"

#include <stdexcept>

#include "elastic/launcher/cpu_binding.hpp"

#include <gtest/gtest.h>

namespace troupe::elastic::launcher {
namespace {

TEST(mpirun_command, horovodrun_style_command_line) {
  launch_options opts;
  opts.np = 4;
  opts.hosts = "localhost:2,127.0.0.1:2";
  opts.timeout_seconds = 9.5;  // troupe-run's own limit, as mpirun's parent: not mpirun's
  opts.command = {"python3", "train.py", "-np", "7"};
  auto cmd = mpirun_command(opts, true, "none");
  EXPECT_EQ(cmd, (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe",
                                           "--bind-to", "none", "--allow-run-as-root", "-np", "4", "-H",
                                           "localhost:2,127.0.0.1:2",
                                           "python3", "train.py", "-np", "7"}));
}

// On several hosts every knob goes out by name with -x (mpirun passes other
// hosts' ranks nothing else): the flags' and the user's TROUPE_* and
// HOROVOD_*, once each, in name order; on one host mpirun's environment
// reaches the ranks anyway.
TEST(mpirun_command, knobs_reach_other_hosts_by_name) {
  launch_options opts;
  opts.np = 4;
  opts.hosts = "a:2,b:2";
  opts.knobs = {{"TROUPE_FUSION_THRESHOLD", "1024"}, {"TROUPE_LOG_LEVEL", "info"}};
  opts.command = {"./prog"};
  const std::vector<std::string> env{"PATH=/bin", "TROUPE_LOG_LEVEL=debug",
                                     "HOROVOD_CYCLE_TIME=5", "TROUPE_SECRET_KEY=abc",
                                     "MY_TROUPE_X=1", "HOROVOD_X"};
  EXPECT_EQ(mpirun_command(opts, false, "none", env),
            (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe", "--bind-to",
                                      "none", "-np", "4", "-H", "a:2,b:2",
                                      "-x", "HOROVOD_CYCLE_TIME", "-x", "HOROVOD_X",
                                      "-x", "TROUPE_FUSION_THRESHOLD", "-x", "TROUPE_LOG_LEVEL",
                                      "-x", "TROUPE_SECRET_KEY", "./prog"}));
  opts.hosts.clear();
  EXPECT_EQ(mpirun_command(opts, false, "none", env),
            (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe", "--bind-to",
                                      "none", "-np", "4", "./prog"}));
}

TEST(mpirun_command, not_root_and_hostfile) {
  launch_options opts;
  opts.np = 2;
  opts.hostfile = "hosts.txt";
  opts.command = {"./prog"};
  auto cmd = mpirun_command(opts, false, "none");
  EXPECT_EQ(cmd, (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe",
                                           "--bind-to", "none", "-np", "2", "--hostfile", "hosts.txt", "./prog"}));
}

TEST(mpirun_command, mpi_args_go_before_the_command_and_may_bind) {
  launch_options opts;
  opts.np = 2;
  opts.mpi_args = {"--map-by", "ppr:1:core", "-x", "FOO"};
  opts.command = {"./prog"};
  EXPECT_EQ(mpirun_command(opts, false, "none"),
            (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe", "--bind-to",
                                      "none", "-np", "2", "--map-by", "ppr:1:core", "-x", "FOO",
                                      "./prog"}));
  opts.output_dir = "logs";  // mpirun writes the files itself
  EXPECT_EQ(mpirun_command(opts, false, "none"),
            (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe", "--bind-to",
                                      "none", "-np", "2", "--output-filename", "logs", "--map-by",
                                      "ppr:1:core", "-x", "FOO", "./prog"}));
  opts.output_dir.clear();
  opts.mpi_args = {"--bind-to", "core"};  // the user's binding, not troupe-run's
  EXPECT_EQ(mpirun_command(opts, false, "none"),
            (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe", "-np", "2",
                                      "--bind-to", "core", "./prog"}));
}

TEST(mpirun_command, timestamps_are_mpiruns) {
  launch_options opts;
  opts.np = 1;
  opts.prefix_timestamp = true;  // horovodrun's --prefix-output-with-timestamp
  opts.command = {"./prog"};
  EXPECT_EQ(mpirun_command(opts, false, "none"),
            (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe", "--bind-to",
                                      "none", "-np", "1", "--timestamp-output", "./prog"}));
}

TEST(mpirun_command, binding_args_replace_troupe_runs_binding) {
  launch_options opts;
  opts.np = 2;
  opts.binding_args = {"--bind-to", "core", "--map-by", "slot"};  // horovodrun's --binding-args
  opts.mpi_args = {"-x", "FOO"};
  opts.command = {"./prog"};
  EXPECT_EQ(mpirun_command(opts, false, "none"),
            (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe", "--bind-to",
                                      "core", "--map-by", "slot", "-np", "2", "-x", "FOO",
                                      "./prog"}));
}

TEST(cpu_binding, auto_binds_mpiruns_ranks_on_one_host_of_one_rank_per_cpu) {
  const std::vector<std::string> bound{"--bind-to", "hwthread"};
  const std::vector<std::string> unbound{"--bind-to", "none"};
  EXPECT_EQ(mpirun_binding("auto", 2, true, 2), bound);
  EXPECT_EQ(mpirun_binding("auto", 2, true, 16), unbound);  // compute threads keep their CPUs
  EXPECT_EQ(mpirun_binding("auto", 4, true, 2), unbound);   // ranks would share CPUs
  EXPECT_EQ(mpirun_binding("auto", 2, false, 2), unbound);  // other hosts: unknown CPUs
  EXPECT_EQ(mpirun_binding("none", 2, true, 2), unbound);
  EXPECT_EQ(mpirun_binding("cpu", 2, true, 16), bound);
  EXPECT_EQ(mpirun_binding("cpu", 64, false, 2), bound);  // mpirun checks the other hosts
  EXPECT_THROW(mpirun_binding("cpu", 3, true, 2), std::invalid_argument);

  EXPECT_THROW(mpirun_binding("runtime", 2, true, 2), std::invalid_argument);  // threads: Gloo mode
}

// Gloo mode's auto binds whole processes where a one-host job has one rank
// per CPU and the shared segment carries the data; with it off (Gloo's TCP
// is slower bound) it pins only the runtime's threads.
TEST(cpu_binding, gloo_mode_binds_one_rank_per_cpu_unless_tcp_carries_the_data) {
  const auto placed = [](const std::string& mode, int ranks, bool alone, bool tcp) {
    const auto p = rank_cpus(mode, ranks, {4, 6}, alone, tcp);
    return std::make_pair(p.cpus, p.whole_process);
  };
  using placement = std::pair<std::vector<int>, bool>;
  EXPECT_EQ(placed("cpu", 2, true, false), (placement{{4, 6}, true}));
  EXPECT_EQ(placed("cpu", 1, false, true), (placement{{4}, true}));
  EXPECT_EQ(placed("runtime", 1, false, false), (placement{{4}, false}));
  EXPECT_EQ(placed("runtime", 2, true, true), (placement{{4, 6}, false}));
  EXPECT_EQ(placed("auto", 2, true, false), (placement{{4, 6}, true}));
  EXPECT_EQ(placed("auto", 2, true, true), (placement{{4, 6}, false}));  // --shm 0
  EXPECT_EQ(placed("auto", 1, true, false), (placement{{}, false}));  // compute threads keep their CPUs
  EXPECT_EQ(placed("auto", 2, false, false), (placement{{}, false}));  // ranks on other hosts too
  EXPECT_EQ(placed("none", 2, true, false), (placement{{}, false}));
  EXPECT_THROW(rank_cpus("cpu", 3, {4, 6}, true, false), std::invalid_argument);
  EXPECT_THROW(rank_cpus("runtime", 3, {4, 6}, true, true), std::invalid_argument);
}

TEST(cpu_binding, maps_by_hwthread_unless_the_user_maps) {
  launch_options opts;
  opts.np = 2;
  opts.hosts = "node1:2,node2:2";
  opts.command = {"./prog"};
  EXPECT_EQ(mpirun_command(opts, false, "cpu"),
            (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe", "--map-by",
                                      "hwthread", "--bind-to", "hwthread", "-np", "2", "-H",
                                      "node1:2,node2:2", "./prog"}));
  opts.mpi_args = {"--map-by", "ppr:1:socket"};
  EXPECT_EQ(mpirun_command(opts, false, "cpu"),
            (std::vector<std::string>{"mpirun", "--tag-output", "--oversubscribe", "--bind-to",
                                      "hwthread", "-np", "2", "-H", "node1:2,node2:2",
                                      "--map-by", "ppr:1:socket", "./prog"}));
}

} // namespace
} // namespace troupe::elastic::launcher
