#include "elastic/launcher/ssh_command.hpp"

#include <gtest/gtest.h>

namespace troupe::elastic::launcher {
namespace {

// Horovod's options (no prompt can wait for a password or a host key), the
// port and identity before the host, and one quoted remote command: cd,
// stdin moved to fd 3 for the secret, the worker's variables but the local
// session's and any secret.
TEST(ssh_command, builds_horovods_command_line) {
  const auto argv = ssh_command(
    "node-a", {2222, "/keys/id ed"}, "/work/it's here",
    {"A=1", "BASH_FUNC_f%%=() { :; }", "OLDPWD=/old", "HOROVOD_SECRET_KEY=hush",
     "TROUPE_SECRET_FD=7", "Q=it's", "1BAD=x"},
    {"python3", "train.py", "a b"});
  const std::vector<std::string> expected{
    "ssh", "-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=accept-new", "-o",
    "BatchMode=yes", "-p", "2222", "-i", "/keys/id ed", "--", "node-a",
    "cd '/work/it'\\''s here' >/dev/null 2>&1; exec 3<&0 </dev/null; exec env 'A=1' "
    "'Q=it'\\''s' TROUPE_SECRET_FD=3 'python3' 'train.py' 'a b'"};
  EXPECT_EQ(argv, expected);
}

TEST(ssh_command, defaults_leave_port_and_identity_to_ssh) {
  const auto argv = ssh_command("[fe80::1]", {}, "/", {}, {"w"});
  const std::vector<std::string> expected{
    "ssh", "-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=accept-new", "-o",
    "BatchMode=yes", "--", "fe80::1",
    "cd '/' >/dev/null 2>&1; exec 3<&0 </dev/null; exec env TROUPE_SECRET_FD=3 'w'"};
  EXPECT_EQ(argv, expected);
}

// A host named like an option ("-oProxyCommand=...", which discovery
// refuses, or one given with -H) stays a host name: ssh reads no option
// after "--".
TEST(ssh_command, ends_the_options_before_the_host) {
  const auto argv = ssh_command("-oProxyCommand=touch /tmp/x", {}, "/", {}, {"w"});
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv[argv.size() - 3], "--");
  EXPECT_EQ(argv[argv.size() - 2], "-oProxyCommand=touch /tmp/x");
}

} // namespace
} // namespace troupe::elastic::launcher
