#include "elastic/launcher/options.hpp"

#include "workers/config.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

namespace troupe::elastic::launcher {

namespace {

constexpr int usage_error = 2;

// troupe-run's options that take no value.
bool is_flag(const std::string& arg) {
  return arg == "-h" || arg == "--help" || arg == "--gloo" || arg == "--mpi";
}

// CLI11 rejects multi-letter single-dash names, but "-np" is what every
// horovodrun and mpirun user types. Rewrite it, but only among troupe-run's
// own arguments: every other option of troupe-run takes one value, so the
// command starts at the first word that is neither an option nor an
// option's value.
std::vector<std::string> normalize(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    if (arg == "--" || arg.empty() || arg[0] != '-')
      break;
    if (arg == "-np")
      args[i] = "--num-proc";
    else if (arg.rfind("-np=", 0) == 0)
      args[i] = "--num-proc=" + arg.substr(4);
    bool inline_value = arg.find('=') != std::string::npos
                        || (arg.size() > 2 && arg[1] != '-' && arg != "-np");
    if (!inline_value && !is_flag(arg))
      ++i;
  }
  return args;
}

} // namespace

parse_result parse_options(int argc, char** argv) {
  CLI::App app{"Starts N ranks of a Troupe (or Horovod / torch.distributed) "
               "job on this machine, with a rendezvous store, and forwards "
               "their output tagged by rank.\n\n"
               "  troupe-run -np N [-H host:slots,...] [--hostfile FILE] "
               "[options] [--] command [args...]\n",
               "troupe-run"};
  launch_options opts;
  app.add_option("--num-proc", opts.np, "number of ranks (also -np)")
    ->required()
    ->check(CLI::PositiveNumber);
  auto* hosts = app.add_option("-H,--hosts", opts.hosts,
                               "hosts and their slots: host:slots,... "
                               "(default localhost:N)");
  app.add_option("--hostfile", opts.hostfile,
                 "file with one 'host slots=N' or 'host:N' per line")
    ->check(CLI::ExistingFile)
    ->excludes(hosts);
  double timeout = 0;
  auto* timeout_opt = app.add_option("--timeout", timeout,
                                     "stop the whole job after SECONDS "
                                     "(exit code 124)")
                        ->check(CLI::PositiveNumber);
  bool gloo = false;
  auto* gloo_flag =
    app.add_flag("--gloo", gloo, "use the Gloo CPU backend (sets TROUPE_CPU_OPERATIONS=gloo)");
  app.add_flag("--mpi", opts.use_mpirun,
               "launch through mpirun and use the MPI CPU backend, as horovodrun --mpi")
    ->excludes(gloo_flag);
  const auto& table = workers::knobs();
  std::vector<std::string> knob_values(table.size());
  std::vector<CLI::Option*> knob_opts;
  for (size_t i = 0; i < table.size(); ++i)
    knob_opts.push_back(app.add_option(std::string("--") + table[i].flag,
                                       knob_values[i],
                                       std::string(table[i].help) + " (sets "
                                         + table[i].env + ")"));
  // Everything from the first word troupe-run does not know is the command.
  app.prefix_command();
  try {
    auto args = normalize(argc, argv);
    std::reverse(args.begin(), args.end()); // CLI11 consumes from the back
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return {std::nullopt, rc == 0 ? 0 : usage_error};
  }
  opts.command = app.remaining();
  if (!opts.command.empty() && opts.command.front() == "--")
    opts.command.erase(opts.command.begin());
  auto fail = [](const std::string& message) {
    std::cerr << "troupe-run: error: " << message << "\n"
              << "Run with --help for more information.\n";
    return parse_result{std::nullopt, usage_error};
  };
  if (opts.command.empty())
    return fail("no command given");
  if (opts.command.front().size() > 1 && opts.command.front()[0] == '-'
      && app.remaining().front() != "--")
    return fail("unknown option '" + opts.command.front() + "'");
  if (*timeout_opt)
    opts.timeout_seconds = timeout;
  workers::config scratch;
  for (size_t i = 0; i < table.size(); ++i) {
    if (knob_opts[i]->count() == 0)
      continue;
    try {
      // Checked here so that a typo fails once, not in every rank.
      table[i].parse(scratch, knob_values[i]);
    } catch (const workers::config_error& e) {
      return fail(std::string("--") + table[i].flag + ": " + e.what());
    }
    opts.knobs.emplace_back(table[i].env, knob_values[i]);
  }
  if (gloo || opts.use_mpirun)
    opts.knobs.emplace_back("TROUPE_CPU_OPERATIONS", gloo ? "gloo" : "mpi");
  return {std::move(opts), 0};
}

} // namespace troupe::elastic::launcher
