#include "elastic/launcher/ssh_command.hpp"

#include "elastic/job_secret.hpp"

#include <cctype>

namespace troupe::elastic::launcher {

namespace {

bool is_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Horovod leaves out shell functions, OLDPWD and its secret key; so does
// this, and any *_SECRET_KEY: a secret would show in `ps` on both hosts.
bool forwarded(const std::string& name) {
  return is_name(name) && name.rfind("BASH_FUNC_", 0) != 0 && name != "OLDPWD" &&
         !ends_with(name, "_SECRET_KEY") && name != secret_fd_variable;
}

} // namespace

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::vector<std::string> ssh_command(const std::string& host, const ssh_options& ssh,
                                     const std::string& cwd,
                                     const std::vector<std::string>& env,
                                     const std::vector<std::string>& command) {
  std::string remote = "cd " + shell_quote(cwd) + " >/dev/null 2>&1; exec " +
                       std::to_string(remote_secret_fd) + "<&0 </dev/null; exec env";
  for (const auto& entry : env) {
    const auto eq = entry.find('=');
    if (eq != std::string::npos && forwarded(entry.substr(0, eq)))
      remote += " " + shell_quote(entry);
  }
  remote += " " + std::string(secret_fd_variable) + "=" + std::to_string(remote_secret_fd);
  for (const auto& word : command)
    remote += " " + shell_quote(word);
  std::vector<std::string> argv{"ssh",       "-o", "PasswordAuthentication=no",
                                "-o",        "StrictHostKeyChecking=accept-new",
                                "-o",        "BatchMode=yes"};
  if (ssh.port)
    argv.insert(argv.end(), {"-p", std::to_string(*ssh.port)});
  if (!ssh.identity_file.empty())
    argv.insert(argv.end(), {"-i", ssh.identity_file});
  // ssh takes an IPv6 literal without discovery's brackets. After "--", a
  // host (and the command) cannot be read as an option: "-oProxyCommand=..."
  // would run a command here.
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  argv.push_back("--");
  argv.push_back(bracketed ? host.substr(1, host.size() - 2) : host);
  argv.push_back(remote);
  return argv;
}

} // namespace troupe::elastic::launcher
