#include "elastic/launcher/discovery.hpp"

#include "elastic/launcher/seconds_text.hpp"
#include "elastic/launcher/worker_process.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <poll.h>
#include <sstream>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

namespace troupe::elastic::launcher {

namespace {

using clock = std::chrono::steady_clock;

constexpr auto cancel_check = std::chrono::milliseconds(100);

std::string trim(const std::string& s) {
  auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// `line` in quotes for an error message, its control bytes as \xNN: a
// carriage return would otherwise rewrite the terminal's line.
std::string quoted(const std::string& line) {
  std::string out = "'";
  for (unsigned char c : line) {
    if (c < 0x20 || c == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

// Blanks and control bytes: no host name has them, and a name goes into
// command lines (--spawn-command) and log lines.
bool valid_host_name(const std::string& name) {
  return !name.empty() && std::none_of(name.begin(), name.end(), [](unsigned char c) {
    return c <= 0x20 || c == 0x7f;
  });
}

int parse_slots(const std::string& text, const std::string& line) {
  try {
    size_t used = 0;
    int v = std::stoi(text, &used);
    if (used == text.size() && v >= 1)
      return v;
  } catch (const std::exception&) {
    // reported below
  }
  throw plan_error("host discovery line " + quoted(line) + ": slots " + quoted(text) +
                   " is not a positive integer");
}

host_spec parse_line(const std::string& line, std::optional<int> default_slots) {
  host_spec h;
  std::string slots;
  if (line.front() == '[') {
    auto close = line.find(']');
    if (close == std::string::npos || close == 1)
      throw plan_error("host discovery line " + quoted(line) + ": unterminated '[' address");
    h.name = line.substr(1, close - 1);
    auto rest = line.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        throw plan_error("host discovery line " + quoted(line) + ": expected ':slots' after ']'");
      slots = rest.substr(1);
    }
  } else {
    auto colon = line.find(':');
    h.name = line.substr(0, colon);
    if (colon != std::string::npos)
      slots = line.substr(colon + 1);
  }
  if (!valid_host_name(h.name))
    throw plan_error("host discovery line " + quoted(line) + ": not a host name");
  // ssh would take it for an option (-oProxyCommand=... runs a command).
  if (h.name.front() == '-')
    throw plan_error("host discovery line " + quoted(line) +
                     ": not a host name (starts with '-')");
  if (slots.empty() && line.back() == ':')
    throw plan_error("host discovery line " + quoted(line) + ": empty slots");
  h.slots = !slots.empty() ? parse_slots(slots, line) : default_slots.value_or(1);
  return h;
}

// Reads what `fd` holds now into `text`; false at EOF.
bool read_some(net::unique_fd& fd, std::string& text) {
  char buf[4096];
  for (;;) {
    auto n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return true;
    fd.reset();
    return false;
  }
}

std::string last_line(const std::string& text) {
  auto t = trim(text);
  auto nl = t.find_last_of('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

} // namespace

std::vector<host_spec> parse_discovery_output(const std::string& text,
                                              std::optional<int> default_slots) {
  std::vector<host_spec> hosts;
  std::istringstream in{text};
  std::string raw;
  while (std::getline(in, raw)) {
    auto line = trim(raw);
    if (line.empty())
      continue;
    auto h = parse_line(line, default_slots);
    bool seen = std::any_of(hosts.begin(), hosts.end(),
                            [&h](const auto& x) { return x.name == h.name; });
    if (!seen)
      hosts.push_back(std::move(h));
  }
  return hosts;
}

discovery_result run_discovery(const std::string& script, std::optional<int> default_slots,
                               const std::vector<std::string>& env,
                               std::chrono::milliseconds timeout,
                               const std::atomic<bool>& cancel) {
  discovery_result r;
  const auto name = "host discovery script '" + script + "'";
  piped_child child;
  try {
    child = spawn_piped({"/bin/sh", "-c", script}, env);
  } catch (const spawn_error& e) {
    r.error = "cannot start " + name + ": " + e.what();
    return r;
  }
  const auto deadline = clock::now() + timeout;
  std::string out, err;
  int status = 0;
  bool exited = false;
  while (!exited) {
    if (clock::now() >= deadline || cancel) {
      ::kill(-child.pid, SIGKILL);
      ::waitpid(child.pid, &status, 0);
      r.error = cancel ? name + " was cancelled"
                       : name + " did not finish within " + seconds_text(timeout) +
                           " s (--host-discovery-timeout); killed it";
      return r;
    }
    std::vector<pollfd> fds;
    for (auto* fd : {&child.out, &child.err})
      if (*fd)
        fds.push_back({fd->get(), POLLIN, 0});
    auto wait = std::min<clock::duration>(deadline - clock::now(), cancel_check);
    if (fds.empty()) {
      // Both pipes closed: wait for the exit itself.
      exited = ::waitpid(child.pid, &status, WNOHANG) == child.pid;
      if (!exited)
        std::this_thread::sleep_for(std::min<clock::duration>(wait, std::chrono::milliseconds(5)));
      continue;
    }
    ::poll(fds.data(), fds.size(),
           static_cast<int>(std::max<long long>(
             0, std::chrono::ceil<std::chrono::milliseconds>(wait).count())));
    if (child.out)
      read_some(child.out, out);
    if (child.err)
      read_some(child.err, err);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.error = name + (WIFEXITED(status) ? " exited with status " + std::to_string(WEXITSTATUS(status))
                                       : " was killed by signal " + std::to_string(WTERMSIG(status)));
    if (auto why = last_line(err); !why.empty())
      r.error += ": " + why;
    return r;
  }
  try {
    r.hosts = parse_discovery_output(out, default_slots);
    r.ok = true;
  } catch (const plan_error& e) {
    r.error = name + ": " + e.what();
  }
  return r;
}

discovery_poller::discovery_poller(options opts)
  : opts_(std::move(opts)), wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!wake_)
    throw spawn_error("eventfd: " + net::error_text(errno));
  thread_ = std::thread([this] { loop(); });
}

discovery_poller::~discovery_poller() {
  stop_ = true;
  thread_.join();
}

std::optional<discovery_result> discovery_poller::take() {
  uint64_t count = 0;
  (void)!::read(wake_.get(), &count, sizeof count);
  std::lock_guard<std::mutex> guard{mtx_};
  auto out = std::move(latest_);
  latest_.reset();
  return out;
}

void discovery_poller::loop() {
  while (!stop_) {
    auto next = clock::now() + opts_.interval;
    auto r = run_discovery(opts_.script, opts_.default_slots, opts_.env, opts_.timeout, stop_);
    if (stop_)
      return;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      latest_ = std::move(r);
    }
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    while (!stop_ && clock::now() < next)
      std::this_thread::sleep_for(std::min<clock::duration>(next - clock::now(), cancel_check));
  }
}

} // namespace troupe::elastic::launcher
