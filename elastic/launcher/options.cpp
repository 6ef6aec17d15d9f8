#include "elastic/launcher/options.hpp"

#include "elastic/launcher/check_build.hpp"
#include "elastic/launcher/config_file.hpp"
#include "workers/config.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <optional>
#include <utility>

#include <wordexp.h>

namespace troupe::elastic::launcher {

namespace {

constexpr int usage_error = 2;

// horovodrun's names for what troupe-run's knob flags set under other
// names, so that a launch line works with only the launcher changed.
struct horovodrun_flag {
  const char* flag;   // horovodrun's, without dashes
  const char* env;    // the knob it sets
  const char* help;
  const char* fixed;  // the value of a flag that takes none; nullptr: it takes one
  int64_t scale;      // a value is a whole number times this (MiB: bytes)
};

const horovodrun_flag horovodrun_flags[] = {
  {"fusion-threshold-mb", "TROUPE_FUSION_THRESHOLD",
   "horovodrun's name: the fusion threshold in MiB", nullptr, int64_t{1} << 20},
  {"no-stall-check", "TROUPE_STALL_CHECK_DISABLE", "horovodrun's name: no stall inspector",
   "1", 0},
  {"stall-check-warning-time-seconds", "TROUPE_STALL_CHECK_TIME_SECONDS",
   "horovodrun's name for --stall-check-time-seconds", nullptr, 0},
  {"stall-check-shutdown-time-seconds", "TROUPE_STALL_SHUTDOWN_TIME_SECONDS",
   "horovodrun's name for --stall-shutdown-time-seconds", nullptr, 0},
  {"no-hierarchical-allreduce", "TROUPE_HIERARCHICAL_ALLREDUCE",
   "horovodrun's: flat NCCL allreduces (the default)", "0", 0},
  {"no-hierarchical-allgather", "TROUPE_HIERARCHICAL_ALLGATHER",
   "horovodrun's: flat NCCL allgathers (the default)", "0", 0},
};

// `text` split into words as the shell horovodrun hands --mpi-args to
// splits them (quotes, escapes, variables, globs; no command
// substitution); none, with why, when it cannot.
std::optional<std::vector<std::string>> shell_words(const std::string& text, std::string& why) {
  wordexp_t words{};
  const int rc = ::wordexp(text.c_str(), &words, WRDE_NOCMD);
  if (rc != 0) {
    why = rc == WRDE_CMDSUB  ? "command substitution is not run"
          : rc == WRDE_SYNTAX ? "a quote is left open, or the syntax is a shell's error"
                              : "a character a shell would not take here (| & ; < > ( ) { })";
    if (rc == WRDE_NOSPACE)
      ::wordfree(&words);
    return std::nullopt;
  }
  std::vector<std::string> out(words.we_wordv, words.we_wordv + words.we_wordc);
  ::wordfree(&words);
  return out;
}

// troupe-run's options that take no value.
bool is_flag(const std::string& arg) {
  if (arg == "-h" || arg == "--help" || arg == "--gloo" || arg == "--mpi" ||
      arg == "--check-build" || arg == "--verbose" || arg == "-v" || arg == "--version" ||
      arg == "--tcp" || arg == "--torus-allreduce" || arg == "--no-torus-allreduce" ||
      arg == "--disable-cache" || arg == "--prefix-output-with-timestamp")
    return true;
  const auto& table = workers::knobs();
  return std::any_of(table.begin(), table.end(),
                     [&](const workers::knob& k) {
                       return k.flag && k.flag_value && arg == std::string("--") + k.flag;
                     }) ||
         std::any_of(std::begin(horovodrun_flags), std::end(horovodrun_flags),
                     [&](const horovodrun_flag& h) {
                       return h.fixed && arg == std::string("--") + h.flag;
                     });
}

// CLI11 rejects multi-letter single-dash names, but "-np" is what every
// horovodrun and mpirun user types. Rewrite it, but only among troupe-run's
// own arguments: every other option of troupe-run takes one value (but
// --blacklist-cooldown-range, two), so the
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
    else if (arg == "-prefix-timestamp") // horovodrun's short names
      args[i] = "--prefix-output-with-timestamp";
    else if (arg == "-cb")
      args[i] = "--check-build";
    else if (arg == "-hostfile")
      args[i] = "--hostfile";
    else if (arg == "--network-interfaces") // horovodrun's name
      args[i] = "--network-interface";
    else if (arg.rfind("--network-interfaces=", 0) == 0)
      args[i] = "--network-interface=" + arg.substr(21);
    else if (arg.rfind("-np=", 0) == 0)
      args[i] = "--num-proc=" + arg.substr(4);
    bool inline_value = arg.find('=') != std::string::npos
                        || (arg.size() > 2 && arg[1] != '-' && arg != "-np");
    if (!inline_value && !is_flag(arg))
      i += arg == "--blacklist-cooldown-range" ? 2 : 1;
  }
  return args;
}

} // namespace

std::optional<int64_t> whole_number(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(text);
}

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
  app.add_flag_callback(
    "--check-build",
    [] {
      std::cout << build_report(TROUPE_VERSION, TROUPE_PYTHON_PACKAGE != 0);
      throw CLI::Success();
    },
    "print which frameworks, controllers and tensor operations this build has, and exit "
    "(as horovodrun --check-build)");
  app.set_version_flag("-v,--version", std::string("Troupe v") + TROUPE_VERSION);
  app.add_flag("--verbose", opts.verbose,
               "say which ranks start where, with which command and knobs (as horovodrun's)");
  app.add_option("--output-filename", opts.output_dir,
                 "folder that also gets each rank's output, in rank.<rank>/stdout and "
                 "rank.<rank>/stderr (as horovodrun's; with --mpi, mpirun's --output-filename)");
  std::string mpi_args;
  auto* mpi_args_opt =
    app.add_option("--mpi-args", mpi_args,
                   "with --mpi: more arguments for mpirun, as horovodrun's "
                   "(--mpi-args=\"--map-by ppr:1:core\")");
  std::string binding_args;
  auto* binding_args_opt =
    app.add_option("--binding-args", binding_args,
                   "with --mpi: mpirun's binding arguments instead of troupe-run's "
                   "'--bind-to none', as horovodrun's (--binding-args=\"--bind-to core\")");
  // horovodrun's flag turns off its 60-minute cache of ssh and NIC checks
  // (not the response cache: that is --cache-capacity 0).
  app.add_flag("--disable-cache",
               "horovodrun's: run the host checks every time; troupe-run keeps no cache of "
               "them, so this changes nothing");
  app.add_flag("--prefix-output-with-timestamp", opts.prefix_timestamp,
               "start each output line with the local time, as horovodrun's "
               "(also -prefix-timestamp; with --mpi, mpirun's --timestamp-output)");
  // horovodrun's 2-D NCCL allreduce, which Horovod too turns off where it
  // cannot run it (no NCCL, one host).
  bool torus = false;
  app.add_flag("--torus-allreduce", torus,
               "horovodrun's: Troupe has no torus allreduce, so it is ignored (with a warning)");
  app.add_flag("--no-torus-allreduce",
               "horovodrun's: no torus allreduce, which Troupe never runs; changes nothing");
  bool tcp = false;
  app.add_flag("--tcp", tcp,
               "TCP only: NCCL does not use InfiniBand (NCCL_IB_DISABLE=1), as horovodrun's");
  std::string config_path;
  app.add_option("--config-file", config_path,
                 "horovodrun's YAML file of settings (params, autotune, timeline, stall_check, "
                 "library_options, logging, controller); flags given override it")
    ->check(CLI::ExistingFile);
  auto& el = opts.elastic;
  app.add_option("--min-np", el.min_np,
                 "elastic: fewest ranks to train with (default -np); below it the job waits "
                 "up to --elastic-timeout")
    ->check(CLI::PositiveNumber);
  app.add_option("--max-np", el.max_np, "elastic: most ranks to run (default: every slot)")
    ->check(CLI::PositiveNumber);
  app.add_option("--host-discovery-script", el.discovery_script,
                 "elastic: command printing the usable hosts, one 'host' or 'host:slots' per "
                 "line; run every second");
  app.add_option("--slots-per-host,--slots", el.slots_per_host,
                 "elastic: slots of a discovered host printed without ':slots' (default 1)")
    ->check(CLI::PositiveNumber);
  app.add_option("--reset-limit", el.reset_limit,
                 "elastic: stop the job when this many resets have happened")
    ->check(CLI::NonNegativeNumber);
  app.add_option("--blacklist-cooldown-range", el.cooldown,
                 "elastic: MIN MAX seconds a failed host stays out (doubling per failure); "
                 "default: for good");
  app.add_option("--host-discovery-timeout", el.discovery_timeout_seconds,
                 "elastic: kill a discovery script still running after SECONDS (default 10)")
    ->check(CLI::PositiveNumber);
  app.add_option("--spawn-command", el.spawn_command,
                 "elastic: shell prefix that starts a worker on host $TROUPE_SPAWN_HOST "
                 "(default: start it here; the host must be this machine)");
  app.add_option("-p,--ssh-port", opts.ssh.port,
                 "ssh port of the other hosts, which workers are started on over ssh")
    ->check(CLI::Range(1, 65535));
  app.add_option("-i,--ssh-identity-file", opts.ssh.identity_file,
                 "ssh identity (private key) for the other hosts");
  const auto& table = workers::knobs();
  std::vector<std::string> knob_values(table.size());
  std::vector<CLI::Option*> knob_opts;
  for (size_t i = 0; i < table.size(); ++i) {
    if (!table[i].flag) {
      knob_opts.push_back(nullptr);
      continue;
    }
    const auto name = std::string("--") + table[i].flag;
    const auto help = std::string(table[i].help) + " (sets " + table[i].env + ")";
    if (table[i].flag_value) {
      knob_values[i] = table[i].flag_value;
      knob_opts.push_back(app.add_flag(name, help));
    } else {
      knob_opts.push_back(app.add_option(name, knob_values[i], help));
    }
  }
  std::vector<std::string> horovodrun_values(std::size(horovodrun_flags));
  std::vector<CLI::Option*> horovodrun_opts;
  for (size_t i = 0; i < std::size(horovodrun_flags); ++i) {
    const auto& h = horovodrun_flags[i];
    const auto name = std::string("--") + h.flag;
    const auto help = std::string(h.help) + " (sets " + h.env + ")";
    horovodrun_opts.push_back(h.fixed ? app.add_flag(name, help)
                                      : app.add_option(name, horovodrun_values[i], help));
  }
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
  // --mpi may come from the config file, so this waits for it.
  const auto mpirun_words = [&](const CLI::Option* opt, const std::string& text,
                                std::vector<std::string>& words) -> std::optional<std::string> {
    if (!*opt)
      return std::nullopt;
    if (!opts.use_mpirun)
      return opt->get_name() + " are mpirun's: they need --mpi";
    std::string why;
    auto split = shell_words(text, why);
    if (!split)
      return opt->get_name() + " '" + text + "': " + why;
    words = std::move(*split);
    return std::nullopt;
  };
  workers::config scratch;
  for (size_t i = 0; i < table.size(); ++i) {
    if (!knob_opts[i] || knob_opts[i]->count() == 0)
      continue;
    try {
      // Checked here so that a typo fails once, not in every rank.
      table[i].parse(scratch, knob_values[i]);
    } catch (const workers::config_error& e) {
      return fail(std::string("--") + table[i].flag + ": " + e.what());
    }
    opts.knobs.emplace_back(table[i].env, knob_values[i]);
  }
  for (size_t i = 0; i < std::size(horovodrun_flags); ++i) {
    const auto& h = horovodrun_flags[i];
    if (horovodrun_opts[i]->count() == 0)
      continue;
    const auto flag = std::string("--") + h.flag;
    std::string value = h.fixed ? h.fixed : horovodrun_values[i];
    if (h.scale > 1) {
      const auto n = whole_number(value);
      if (!n)
        return fail(flag + ": '" + value + "' is not a whole number");
      value = std::to_string(*n * h.scale);
    }
    const auto knob = std::find_if(table.begin(), table.end(),
                                   [&](const workers::knob& k) { return k.env == std::string(h.env); });
    if (std::any_of(opts.knobs.begin(), opts.knobs.end(),
                    [&](const auto& set) { return set.first == h.env; }))
      return fail(flag + " and --" + knob->flag + " both set " + h.env + "; give one");
    try {
      knob->parse(scratch, value);
    } catch (const workers::config_error& e) {
      return fail(flag + ": " + e.what());
    }
    opts.knobs.emplace_back(h.env, value);
  }
  if (!config_path.empty()) {
    config_file file;
    try {
      file = read_config_file(config_path);
    } catch (const config_file_error& e) {
      return fail("--config-file " + std::string(e.what()));
    }
    for (const auto& why : file.ignored)
      std::cerr << "troupe-run: warning: --config-file " << config_path << ": " << why
                << " is ignored\n";
    if (!gloo && !opts.use_mpirun) {
      if (file.controller == "mpi" && opts.is_elastic())
        return fail("--config-file " + config_path +
                    ": controller mpi, but elastic mode runs on Gloo");
      opts.use_mpirun = file.controller == "mpi";
      gloo = file.controller == "gloo";
    }
    for (const auto& [env, value] : file.knobs) {
      // A flag given on the command line wins, as with horovodrun.
      if (std::any_of(opts.knobs.begin(), opts.knobs.end(),
                      [&](const auto& set) { return set.first == env; }))
        continue;
      const auto knob = std::find_if(table.begin(), table.end(),
                                     [&](const workers::knob& k) { return k.env == env; });
      try {
        knob->parse(scratch, value);
      } catch (const workers::config_error& e) {
        return fail("--config-file " + config_path + ": " + e.what());
      }
      opts.knobs.emplace_back(env, value);
    }
  }
  if (auto why = mpirun_words(mpi_args_opt, mpi_args, opts.mpi_args))
    return fail(*why);
  if (auto why = mpirun_words(binding_args_opt, binding_args, opts.binding_args))
    return fail(*why);
  if (tcp)
    opts.knobs.emplace_back("NCCL_IB_DISABLE", "1");
  if (torus)
    std::cerr << "troupe-run: warning: --torus-allreduce is ignored: Troupe has no torus "
                 "allreduce (NCCL allreduces are flat, or --hierarchical-allreduce)\n";
  if (opts.is_elastic()) {
    if (opts.use_mpirun)
      return fail("elastic mode (--min-np, --host-discovery-script) runs on Gloo, not --mpi");
    if (!el.discovery_script.empty() && (!opts.hosts.empty() || !opts.hostfile.empty()))
      return fail("--host-discovery-script and -H / --hostfile exclude each other");
    if (el.min_np && *el.min_np > opts.np)
      return fail("--min-np " + std::to_string(*el.min_np) + " is above -np " +
                  std::to_string(opts.np));
    if (el.max_np && *el.max_np < opts.np)
      return fail("--max-np " + std::to_string(*el.max_np) + " is below -np " +
                  std::to_string(opts.np));
    if (el.cooldown && !(1 <= el.cooldown->first && el.cooldown->first <= el.cooldown->second &&
                         el.cooldown->second <= 3600))
      return fail("--blacklist-cooldown-range MIN MAX needs 1 <= MIN <= MAX <= 3600, got " +
                  std::to_string(el.cooldown->first) + " " +
                  std::to_string(el.cooldown->second));
    gloo = true;
  } else if (el.max_np || el.slots_per_host || el.reset_limit || el.cooldown ||
             !el.spawn_command.empty()) {
    return fail("--max-np, --slots-per-host, --reset-limit, --blacklist-cooldown-range and "
                "--spawn-command need elastic mode (--min-np or --host-discovery-script)");
  }
  if (opts.use_mpirun && (opts.ssh.port || !opts.ssh.identity_file.empty()))
    return fail("--ssh-port and --ssh-identity-file are for troupe-run's own launch; with "
                "--mpi, mpirun starts the ranks with its own ssh settings");
  if (gloo || opts.use_mpirun)
    opts.knobs.emplace_back("TROUPE_CPU_OPERATIONS", gloo ? "gloo" : "mpi");
  return {std::move(opts), 0};
}

} // namespace troupe::elastic::launcher
