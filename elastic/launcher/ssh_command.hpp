#pragma once

#include <optional>
#include <string>
#include <vector>

namespace troupe::elastic::launcher {

/// --ssh-port and --ssh-identity-file (Horovod's flags).
struct ssh_options {
  std::optional<int> port;
  std::string identity_file;
};

/// The fd a worker started over ssh reads the job's secret from: ssh's
/// stdin, which troupe-run writes the secret to and closes.
constexpr int remote_secret_fd = 3;

/// The command that starts `command` on `host` over ssh, as Horovod builds
/// it but refusing a host whose key changed: `ssh -o PasswordAuthentication=no -o StrictHostKeyChecking=accept-new
/// -o BatchMode=yes [-p PORT] [-i FILE] -- HOST 'REMOTE'`, no prompt ever
/// waiting for a password or a host key, and no HOST taken for an option
/// (`--`). REMOTE changes to `cwd`, moves
/// stdin to fd 3 (remote_secret_fd) and runs the command under `env` with
/// the worker's variables (`env` entries "NAME=value"; those of the local
/// session that mean nothing remotely, and any secret, are left out;
/// TROUPE_SECRET_FD becomes 3). Every word is single-quoted for the remote
/// shell.
std::vector<std::string> ssh_command(const std::string& host, const ssh_options& ssh,
                                     const std::string& cwd,
                                     const std::vector<std::string>& env,
                                     const std::vector<std::string>& command);

/// `word` quoted for a POSIX shell.
std::string shell_quote(const std::string& word);

} // namespace troupe::elastic::launcher
