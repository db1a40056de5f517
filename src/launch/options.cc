#include "launch/options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <tuple>

#include "core/config.h"
#include "hoop/version.h"
#include "launch/check_build.h"
#include "launch/exit_codes.h"

namespace hoop::launch {
namespace {

constexpr std::string_view kDescription =
    "Usage: hooprun -np N [options] [--] command [args...]\n"
    "       hooprun [-np N] -H host1:slots,host2:slots [--spawner TEMPLATE] [options] [--] command "
    "[args...]\n"
    "       hooprun [-np N] --hostfile FILE [-p PORT] [-i KEY] [options] [--] command [args...]\n"
    "       hooprun --topology -np N [-H ...] [options]\n"
    "       hooprun -np N [--min-np M] [--max-np X] --host-discovery-script SCRIPT [options] [--] "
    "command [args...]\n\n"
    "Starts N ranks of a hoop job, hosts their rendezvous store and gives each rank its HOOP_*\n"
    "environment (rank, size, local and cross layout, store address, a fresh job secret).\n"
    "With -H or --hostfile the ranks fill the hosts in the order given: the first host gets ranks\n"
    "0..slots-1, the next the ranks after those. Ranks on this machine (localhost, 127.0.0.1\n"
    "or its host name) start directly; ranks on any other host start over ssh (in the same\n"
    "directory, with hooprun at the same path there), or through --spawner, a command prefix\n"
    "such as --spawner \"ip netns exec {host}\". Before a job across hosts starts, a preflight\n"
    "checks that every host is reachable and that every pair of hosts can connect over the\n"
    "network interface the ranks will use.\n"
    "Each line a rank writes is shown with a \"[rank] \" prefix. The first rank to fail ends\n"
    "the job; SIGINT, SIGTERM and SIGHUP are passed on to every rank. When the job ends, the\n"
    "shared-memory segments it left in /dev/shm are removed.\n"
    "With --host-discovery-script the job is elastic: the hosts come from the script, which\n"
    "hooprun runs every second; a failed worker's host is dropped and the others go on in a new\n"
    "round, and new hosts grow the job (docs/guide/elastic.md).";

// CLI11 reads a single dash as the start of one-letter options, so "-np 4" would be "-n"
// with the value "p". Horovod's spelling is rewritten to "--np" for hooprun's own options
// only: the scan stops where the command begins, whose arguments are never touched.
std::vector<std::string> normalize(const CLI::App& app, std::span<const std::string> args) {
  std::vector<std::string> out(args.begin(), args.end());
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::string& arg = out[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;
    if (arg == "-np" || arg.starts_with("-np=")) arg.insert(0, "-");
    const std::string name = arg.substr(0, arg.find('='));
    const CLI::Option* option = app.get_option_no_throw(name);
    // An option whose value is the next argument: skip the value, it may look like a command.
    if (option != nullptr && name == arg && option->get_expected_min() > 0) ++i;
  }
  return out;
}

// CLI11's usage line knows nothing of the command after the options; the description
// carries the real one.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override { return ""; }
};

// Thrown by the --env-table and --check-build flags' callbacks, which CLI11 runs before it
// checks for -np.
struct EnvTableRequested {};
struct CheckBuildRequested {};
struct VersionRequested {
  bool alone = false;  // -v: the version alone, as horovodrun -v prints it
};

ParsedCommandLine usage_error(std::string_view message) {
  return {std::nullopt, kExitUsage,
          fmt::format("hooprun: {}\nRun 'hooprun --help' for usage.\n", message)};
}

}  // namespace

ParsedCommandLine parse_command_line(std::span<const std::string> args) {
  LaunchOptions options;
  double start_timeout = 0;

  CLI::App app{std::string(kDescription), "hooprun"};
  app.formatter(std::make_shared<HelpFormatter>());
  app.prefix_command();
  app.footer("\n" + config::help_text());
  std::string hosts_text;
  std::string spawner;
  std::string rendezvous_addr;
  std::string hostfile;
  std::string network_interface;
  std::string output_dir;
  std::string identity_file;
  int ssh_port = 0;
  app.add_option("-n,--np,--num-proc", options.num_ranks,
                 "Number of ranks to start (also spelled -np) [default with -H: every slot]")
      ->check(CLI::Range(1, 1 << 20));
  CLI::Option* hosts_option = app.add_option(
      "-H,--hosts", hosts_text,
      "Hosts and their slots, host1:slots,host2:slots (a host alone has 1 slot); ranks fill "
      "them in this order [default: localhost]");
  CLI::Option* hostfile_option = app.add_option(
      "--hostfile", hostfile,
      "File of hosts, one a line: 'host slots=N', 'host:N' or 'host' (1 slot); '#' comments");
  hosts_option->excludes(hostfile_option);
  CLI::Option* port_option =
      app.add_option("-p,--ssh-port", ssh_port,
                     "Port of the ssh servers of the other hosts [default: ssh's]")
          ->check(CLI::Range(1, 65535));
  CLI::Option* identity_option = app.add_option("-i,--ssh-identity-file", identity_file,
                                                "Private key ssh logs in with [default: ssh's]");
  CLI::Option* iface_option = app.add_option(
      "--network-interface", network_interface,
      "Network interface (or its IP address) every rank's TCP transport binds (HOOP_IFACE); "
      "the rendezvous store binds its address too, unless --rendezvous-addr is given");
  CLI::Option* output_option = app.add_option(
      "--output-filename", output_dir,
      "Directory (created) where each rank's output is also written, to DIR/rank.N/stdout "
      "and DIR/rank.N/stderr");
  bool no_preflight = false;
  app.add_flag("--disable-preflight,--no-preflight", no_preflight,
               "Skip the checks before a job across hosts starts (every host reachable, every "
               "pair of hosts connecting over the network interface)");
  app.add_option("-x,--env", options.env_vars,
                 "NAME: pass hooprun's value of NAME to every rank (also over ssh); NAME=VALUE: "
                 "set it (repeatable)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::Option* spawner_option = app.add_option(
      "--spawner", spawner,
      "Command prefix that starts every rank (this machine's too), split at spaces, {host} "
      "replaced by the rank's host; the rank's environment must reach the program (e.g. "
      "\"ip netns exec {host}\")");
  CLI::Option* addr_option = app.add_option(
      "--rendezvous-addr", rendezvous_addr,
      "Address the rendezvous store binds to and the ranks connect to [default: the address of "
      "--network-interface; else 127.0.0.1 when every host is this machine, else the first "
      "non-loopback IPv4 address of an interface that is up]");
  app.add_flag("--topology", options.topology,
               "Run hoop-topology (from hooprun's directory) as the ranks, with no command: rank 0 "
               "prints the job's topology summary");
  CLI::Option* timeout_option =
      app.add_option("--start-timeout", start_timeout,
                     "Seconds for every rank to start and join the rendezvous; passed on as "
                     "HOOP_START_TIMEOUT [default: $HOOP_START_TIMEOUT, else 30]")
          ->check(CLI::Validator(
              [](std::string& value) -> std::string {
                double seconds = 0;
                if (CLI::detail::lexical_cast(value, seconds) && seconds > 0 &&
                    seconds <= kMaxStartTimeoutS) {
                  return {};
                }
                return fmt::format("expected seconds in (0, {}], got {}", kMaxStartTimeoutS, value);
              },
              "SECONDS"));
  // horovodrun's -v is its version alone (scripts read it), so hooprun's is too; --version is
  // "hooprun (hoop) VERSION", as every program of hoop's prints it.
  app.add_flag_callback(
      "-v", [] { throw VersionRequested{true}; }, "Print the version alone and exit");
  app.add_flag_callback(
      "--version", [] { throw VersionRequested{false}; },
      "Print \"hooprun (hoop) VERSION\" and exit");
  app.add_flag("--verbose", options.verbose,
               "Print the launch plan and how each rank ended to stderr (hooprun's own "
               "messages only: the ranks' HOOP_LOG_LEVEL stays as it is)");

  app.add_flag_callback(
      "--env-table", [] { throw EnvTableRequested{}; },
      "Print the environment variables as the Markdown table of docs/guide/environment.md, then exit");
  app.add_flag_callback(
      "--check-build", [] { throw CheckBuildRequested{}; },
      "Print the version and which transports, adapters and launchers this build has and can "
      "use here, then exit");
  app.add_flag("--mpi", options.mpi,
               "Start the ranks with mpirun (horovodrun's flags, the job secret passed with -x "
               "HOOP_SECRET by name only); rank 0 hosts the rendezvous store");

  // horovodrun's runtime knobs, each set on every rank as the hoop variable it maps to (the
  // value checked there, as for -x NAME=VALUE).
  struct Knob {
    const char* flag;
    const char* variable;
    const char* help;
    std::string value = {};
    CLI::Option* option = nullptr;
  };
  std::vector<Knob> knobs = {
      {"--timeline-filename", "HOOP_TIMELINE", "FILE: write the timeline there (HOOP_TIMELINE)"},
      {"--fusion-threshold-mb", "HOOP_FUSION_THRESHOLD",
       "MB: fuse allreduces up to this many MiB (HOOP_FUSION_THRESHOLD)"},
      {"--cycle-time-ms", "HOOP_CYCLE_TIME_MS",
       "MS: the background thread's cycle (HOOP_CYCLE_TIME_MS)"},
      {"--cache-capacity", "HOOP_CACHE_CAPACITY",
       "N: entries of the response cache (HOOP_CACHE_CAPACITY)"},
      {"--log-level", "HOOP_LOG_LEVEL",
       "LEVEL: TRACE, DEBUG, INFO, WARNING, ERROR or FATAL (HOOP_LOG_LEVEL)"},
      {"--stall-check-warning-time-seconds", "HOOP_STALL_CHECK_SECONDS",
       "S: warn about a stalled tensor after S seconds (HOOP_STALL_CHECK_SECONDS)"},
      {"--stall-check-shutdown-time-seconds", "HOOP_STALL_SHUTDOWN_SECONDS",
       "S: fail a stall after S seconds (HOOP_STALL_SHUTDOWN_SECONDS)"},
      {"--autotune-log-file", "HOOP_AUTOTUNE_LOG",
       "FILE: the autotuner's trials and choice (HOOP_AUTOTUNE_LOG)"},
      {"--autotune-warmup-samples", "HOOP_AUTOTUNE_WARMUP_SAMPLES",
       "N: samples the autotuner discards first (HOOP_AUTOTUNE_WARMUP_SAMPLES)"},
      {"--autotune-steps-per-sample", "HOOP_AUTOTUNE_STEPS_PER_SAMPLE",
       "N: steps per autotuner sample (HOOP_AUTOTUNE_STEPS_PER_SAMPLE)"},
  };
  for (Knob& k : knobs) k.option = app.add_option(k.flag, k.value, k.help);
  bool disable_cache = false;
  app.add_flag("--disable-cache", disable_cache,
               "Turn the response cache off (HOOP_CACHE_CAPACITY=0)");
  bool autotune = false;
  app.add_flag("--autotune", autotune,
               "Search the fusion threshold, cycle time and allreduce algorithm while the job "
               "runs and keep the fastest (HOOP_AUTOTUNE=1)");
  ElasticOptions elastic;
  std::string discovery_script;
  CLI::Option* discovery_option = app.add_option(
      "--host-discovery-script", discovery_script,
      "Elastic job: an executable that prints the available hosts, one 'host:slots' (or 'host') "
      "a line; hooprun runs it every second, starts workers on new hosts and drops lost ones");
  CLI::Option* min_np_option =
      app.add_option("--min-np", elastic.min_np,
                     "Elastic: fewest workers the job runs with [default: -np]")
          ->check(CLI::Range(1, 1 << 20));
  CLI::Option* max_np_option =
      app.add_option("--max-np", elastic.max_np,
                     "Elastic: most workers the job grows to [default: every slot]")
          ->check(CLI::Range(1, 1 << 20));
  CLI::Option* elastic_timeout_option =
      app.add_option("--elastic-timeout", elastic.timeout_s,
                     "Elastic: seconds to wait for --min-np slots, and for a worker to join a new "
                     "round (HOOP_ELASTIC_TIMEOUT) [default: 600]")
          ->check(CLI::Range(0.001, kMaxStartTimeoutS));
  CLI::Option* reset_limit_option =
      app.add_option("--reset-limit", elastic.reset_limit,
                     "Elastic: end the job after this many resets (new rounds) [default: none]")
          ->check(CLI::Range(0, 1 << 30));
  CLI::Option* slots_option =
      app.add_option("--slots", elastic.default_slots,
                     "Elastic: slots of a discovered host listed without a count [default: 1]")
          ->check(CLI::Range(1, 1 << 20));
  bool gloo = false;
  app.add_flag("--gloo", gloo,
               "Accepted for horovodrun's command lines: hoop's own transports are its Gloo");

  try {
    std::vector<std::string> normalized = normalize(app, args);
    // CLI11 takes the arguments last-first.
    std::reverse(normalized.begin(), normalized.end());
    app.parse(normalized);
  } catch (const CLI::CallForHelp&) {
    return {std::nullopt, kExitSuccess, app.help()};
  } catch (const EnvTableRequested&) {
    return {std::nullopt, kExitSuccess, config::markdown_table()};
  } catch (const VersionRequested& v) {
    return {std::nullopt, kExitSuccess,
            (v.alone ? std::string(hoop::version()) : hoop::version_line("hooprun")) + "\n"};
  } catch (const CheckBuildRequested&) {
    LaunchOptions check;
    check.check_build = true;
    return {check, kExitSuccess, {}};
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }

  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    return usage_error(fmt::format("unknown option '{}'", rest.front()));
  }
  const bool elastic_job = discovery_option->count() > 0;
  for (const CLI::Option* o :
       {min_np_option, max_np_option, elastic_timeout_option, reset_limit_option, slots_option}) {
    if (o->count() > 0 && !elastic_job)
      return usage_error(fmt::format("{} needs --host-discovery-script", o->get_name()));
  }
  if (elastic_job) {
    if (hosts_option->count() > 0 || hostfile_option->count() > 0 || options.mpi ||
        options.topology)
      return usage_error(
          "--host-discovery-script takes its hosts from the script: no -H, --hostfile, --mpi or "
          "--topology");
    if (discovery_script.empty()) return usage_error("--host-discovery-script is empty");
    if (min_np_option->count() == 0 && options.num_ranks == 0)
      return usage_error("an elastic job needs -np or --min-np");
    if (min_np_option->count() == 0) elastic.min_np = options.num_ranks;
    if (options.num_ranks == 0) options.num_ranks = elastic.min_np;
    if (options.num_ranks < elastic.min_np ||
        (elastic.max_np && options.num_ranks > *elastic.max_np))
      return usage_error(fmt::format("-np {} must lie within --min-np {} and --max-np {}",
                                     options.num_ranks, elastic.min_np,
                                     elastic.max_np ? std::to_string(*elastic.max_np) : "(none)"));
    elastic.discovery_script = std::move(discovery_script);
    options.elastic = std::move(elastic);
  } else if (hosts_option->count() > 0 || hostfile_option->count() > 0) {
    Result<std::vector<HostSlots>> hosts =
        hosts_option->count() > 0 ? parse_hosts(hosts_text) : read_hostfile(hostfile);
    if (!hosts.ok()) return usage_error(hosts.status().message());
    options.hosts = std::move(*hosts);
    const int slots = total_slots(options.hosts);
    if (options.num_ranks == 0) options.num_ranks = slots;
    if (options.num_ranks > slots) {
      return usage_error(fmt::format("-np {} exceeds the {} slot{} of the host list ({})",
                                     options.num_ranks, slots, slots == 1 ? "" : "s",
                                     hosts_option->count() > 0 ? "-H" : hostfile));
    }
  } else if (options.num_ranks == 0) {
    return usage_error("-np is required (it may be left out only with -H or --hostfile)");
  } else {
    options.hosts = {HostSlots{"localhost", options.num_ranks}};
  }
  if (options.topology && !rest.empty()) {
    return usage_error("--topology runs hoop-topology and takes no command");
  }
  if (!options.topology && rest.empty()) return usage_error("no command given");
  options.command = std::move(rest);

  if (options.mpi && (spawner_option->count() > 0 || options.topology)) {
    return usage_error("--mpi starts the ranks with mpirun: it takes no --spawner or --topology");
  }
  if (spawner_option->count() > 0) {
    if (expand_spawner(spawner, "").empty()) return usage_error("--spawner is empty");
    options.spawner = std::move(spawner);
  }
  if (addr_option->count() > 0) {
    if (rendezvous_addr.empty()) return usage_error("--rendezvous-addr is empty");
    options.rendezvous_addr = std::move(rendezvous_addr);
  }
  if (timeout_option->count() > 0) options.start_timeout_s = start_timeout;
  options.preflight = !no_preflight;
  if (port_option->count() > 0) options.ssh_port = ssh_port;
  if (identity_option->count() > 0) options.ssh_identity_file = std::move(identity_file);
  for (const auto& [option, value, target] :
       {std::tuple{iface_option, &network_interface, &options.network_interface},
        std::tuple{output_option, &output_dir, &options.output_dir}}) {
    if (option->count() == 0) continue;
    if (value->empty()) return usage_error(fmt::format("{} is empty", option->get_name()));
    *target = std::move(*value);
  }
  if (gloo && options.mpi) return usage_error("--gloo and --mpi do not combine");
  for (const Knob& k : knobs) {
    if (k.option->count() == 0) continue;
    std::string value = k.value;
    if (std::string_view(k.flag) == "--fusion-threshold-mb") value += "M";
    if (std::string_view(k.flag) == "--log-level") {
      std::transform(value.begin(), value.end(), value.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (value == "fatal") value = "error";  // hoop's most severe level
    }
    const config::EnvLookup only_this = [&](std::string_view n) -> std::optional<std::string> {
      if (n == k.variable) return value;
      return std::nullopt;
    };
    if (Status bad = config::validate_env(only_this); !bad.ok()) {
      return usage_error(fmt::format("{} {}: {}", k.flag, k.value, bad.message()));
    }
    options.env_vars.push_back(fmt::format("{}={}", k.variable, value));
  }
  if (disable_cache) options.env_vars.emplace_back("HOOP_CACHE_CAPACITY=0");
  if (autotune) options.env_vars.emplace_back("HOOP_AUTOTUNE=1");
  for (const std::string& var : options.env_vars) {
    if (var.empty() || var.front() == '=') {
      return usage_error(fmt::format("-x '{}': expected NAME or NAME=VALUE", var));
    }
  }
  return {std::move(options), kExitSuccess, {}};
}

}  // namespace hoop::launch
