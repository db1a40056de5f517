#include "launch/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launch/check_build.h"
#include "launch/exit_codes.h"
#include "tests/launch/temp_file.h"
#include "launch/mpi_launch.h"

namespace hoop::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ParsedCommandLine parse(std::vector<std::string> args) { return parse_command_line(args); }

TEST(ParseCommandLineTest, ReadsOptionsAndCommand) {
  const ParsedCommandLine p =
      parse({"-np", "4", "--start-timeout", "2.5", "--verbose", "python3", "-c", "print(1)"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->num_ranks, 4);
  EXPECT_EQ(p.options->start_timeout_s, 2.5);
  EXPECT_TRUE(p.options->verbose);
  EXPECT_THAT(p.options->command, ElementsAre("python3", "-c", "print(1)"));
}

TEST(ParseCommandLineTest, DashVIsTheVersionAloneAsInHorovodrun) {
  for (const char* flag : {"-v", "--version"}) {
    const ParsedCommandLine p = parse({flag});
    EXPECT_FALSE(p.options) << flag;
    EXPECT_EQ(p.exit_code, kExitSuccess) << flag;
  }
  // horovodrun -v prints "0.28.1"; --version names the program as every hoop program does.
  EXPECT_EQ(parse({"-v"}).message, version_text() + "\n");
  EXPECT_EQ(parse({"--version"}).message, "hooprun (hoop) " + version_text() + "\n");
  // Even after other options: no "-np is required".
  EXPECT_EQ(parse({"-np", "2", "-v"}).message, version_text() + "\n");
}

TEST(ParseCommandLineTest, HorovodrunsRuntimeFlagsSetTheirHoopVariables) {
  const ParsedCommandLine p =
      parse({"-np", "2", "--timeline-filename", "/tmp/t.json", "--fusion-threshold-mb", "32",
             "--cycle-time-ms", "2.5", "--cache-capacity", "64", "--log-level", "FATAL",
             "--stall-check-warning-time-seconds", "30",
             "--stall-check-shutdown-time-seconds", "90", "--gloo", "python3", "train.py"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_THAT(p.options->env_vars,
              ElementsAre("HOOP_TIMELINE=/tmp/t.json", "HOOP_FUSION_THRESHOLD=32M",
                          "HOOP_CYCLE_TIME_MS=2.5", "HOOP_CACHE_CAPACITY=64",
                          "HOOP_LOG_LEVEL=error", "HOOP_STALL_CHECK_SECONDS=30",
                          "HOOP_STALL_SHUTDOWN_SECONDS=90"));
  EXPECT_THAT(p.options->command, ElementsAre("python3", "train.py"));
  const ParsedCommandLine off = parse({"-np", "2", "--disable-cache", "true"});
  ASSERT_TRUE(off.options) << off.message;
  EXPECT_THAT(off.options->env_vars, ElementsAre("HOOP_CACHE_CAPACITY=0"));
  const ParsedCommandLine tune =
      parse({"-np", "2", "--autotune", "--autotune-log-file", "/tmp/tune.csv",
             "--autotune-warmup-samples", "1", "--autotune-steps-per-sample", "5", "true"});
  ASSERT_TRUE(tune.options) << tune.message;
  EXPECT_THAT(tune.options->env_vars,
              ElementsAre("HOOP_AUTOTUNE_LOG=/tmp/tune.csv", "HOOP_AUTOTUNE_WARMUP_SAMPLES=1",
                          "HOOP_AUTOTUNE_STEPS_PER_SAMPLE=5", "HOOP_AUTOTUNE=1"));
  const ParsedCommandLine zero = parse({"-np", "2", "--autotune-steps-per-sample", "0", "true"});
  EXPECT_FALSE(zero.options);
  EXPECT_THAT(zero.message, HasSubstr("HOOP_AUTOTUNE_STEPS_PER_SAMPLE"));
  EXPECT_FALSE(parse({"-np", "2", "--gloo", "--mpi", "true"}).options);
  const ParsedCommandLine bad = parse({"-np", "2", "--cycle-time-ms", "abc", "true"});
  EXPECT_FALSE(bad.options);
  EXPECT_THAT(bad.message, HasSubstr("--cycle-time-ms abc"));
  EXPECT_THAT(bad.message, HasSubstr("HOOP_CYCLE_TIME_MS"));
}

TEST(ParseCommandLineTest, EnvTablePrintsTheRegistryWithoutNeedingNp) {
  const ParsedCommandLine p = parse({"--env-table"});
  EXPECT_FALSE(p.options);
  EXPECT_EQ(p.exit_code, kExitSuccess);
  EXPECT_THAT(p.message, HasSubstr("| `HOOP_RANK` | `HOROVOD_RANK` |"));
}

TEST(ParseCommandLineTest, CheckBuildNeedsNothingElse) {
  const ParsedCommandLine p = parse({"--check-build"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_TRUE(p.options->check_build);
  EXPECT_EQ(p.exit_code, kExitSuccess);
}

TEST(ParseCommandLineTest, MpiBuildsHorovodrunsMpirunLine) {
  const ParsedCommandLine p = parse({"--mpi", "-np", "3", "-H", "a:2,b:2", "./prog", "-x"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_TRUE(p.options->mpi);
  EXPECT_THAT(mpirun_command(*p.options, {"HOOP_SECRET", "PATH"}),
              ElementsAre("mpirun", "--allow-run-as-root", "--tag-output", "-np", "3", "-H",
                          "a:2,b:2", "-bind-to", "none", "-map-by", "slot", "-mca", "pml", "ob1",
                          "-mca", "btl", "^openib", "-x", "HOOP_SECRET", "-x", "PATH", "./prog",
                          "-x"));
  for (auto args : {std::vector<std::string>{"--mpi", "-np", "2", "--spawner", "x {host}", "p"},
                    std::vector<std::string>{"--mpi", "-np", "2", "--topology"}}) {
    const ParsedCommandLine bad = parse(args);
    EXPECT_FALSE(bad.options);
    EXPECT_EQ(bad.exit_code, kExitUsage);
    EXPECT_THAT(bad.message, HasSubstr("--mpi starts the ranks with mpirun"));
  }
}

TEST(ParseCommandLineTest, StartTimeoutIsUnsetUnlessGiven) {
  const ParsedCommandLine p = parse({"-np", "1", "true"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_FALSE(p.options->start_timeout_s.has_value());
  EXPECT_FALSE(p.options->verbose);
}

TEST(ParseCommandLineTest, LeavesTheCommandsOwnNpAlone) {
  const ParsedCommandLine p = parse({"-np", "2", "--", "mpi_tool", "-np", "8"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->num_ranks, 2);
  EXPECT_THAT(p.options->command, ElementsAre("mpi_tool", "-np", "8"));
}

TEST(ParseCommandLineTest, AValueThatLooksLikeACommandIsStillAValue) {
  const ParsedCommandLine p = parse({"--start-timeout", "5", "-np", "3", "prog"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->num_ranks, 3);
  EXPECT_THAT(p.options->command, ElementsAre("prog"));
}

TEST(ParseCommandLineTest, HelpGoesToStdoutWithCodeZero) {
  const ParsedCommandLine p = parse({"-h"});
  EXPECT_FALSE(p.options);
  EXPECT_EQ(p.exit_code, kExitSuccess);
  EXPECT_THAT(p.message, HasSubstr("--start-timeout"));
  EXPECT_THAT(p.message, HasSubstr("HOOP_SECRET"));
}

TEST(ParseCommandLineTest, WithoutHostsEveryRankIsOnThisMachine) {
  const ParsedCommandLine p = parse({"-np", "3", "prog"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_THAT(p.options->hosts, ElementsAre(HostSlots{"localhost", 3}));
  EXPECT_FALSE(p.options->spawner);
  EXPECT_FALSE(p.options->rendezvous_addr);
  EXPECT_FALSE(p.options->topology);
}

TEST(ParseCommandLineTest, ReadsHostsSpawnerAndRendezvousAddress) {
  const ParsedCommandLine p =
      parse({"-np", "3", "-H", "a:2,b:2", "--spawner", "ip netns exec {host}", "--rendezvous-addr",
             "10.0.0.1", "prog", "-H", "x"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->num_ranks, 3);
  EXPECT_THAT(p.options->hosts, ElementsAre(HostSlots{"a", 2}, HostSlots{"b", 2}));
  EXPECT_EQ(p.options->spawner, "ip netns exec {host}");
  EXPECT_EQ(p.options->rendezvous_addr, "10.0.0.1");
  EXPECT_THAT(p.options->command, ElementsAre("prog", "-H", "x"));
}

TEST(ParseCommandLineTest, NpDefaultsToEverySlotOfTheHosts) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"-H", "a:2,b,c:3", "prog"},
                                                                {"--hosts", "a:2,b,c:3", "prog"},
                                                                {"--hosts=a:2,b,c:3", "prog"}}) {
    const ParsedCommandLine p = parse(args);
    ASSERT_TRUE(p.options) << p.message;
    EXPECT_EQ(p.options->num_ranks, 6);
  }
}

TEST(ParseCommandLineTest, NpBeyondTheSlotsNamesBothNumbers) {
  const ParsedCommandLine p = parse({"-np", "5", "-H", "a:2,b:2", "prog"});
  EXPECT_FALSE(p.options);
  EXPECT_EQ(p.exit_code, kExitUsage);
  EXPECT_THAT(p.message, HasSubstr("-np 5 exceeds the 4 slots"));
}

TEST(ParseCommandLineTest, TopologyTakesNoCommand) {
  const ParsedCommandLine p = parse({"--topology", "-np", "4", "-H", "a:2,b:2"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_TRUE(p.options->topology);
  EXPECT_TRUE(p.options->command.empty());
  const ParsedCommandLine with_command = parse({"--topology", "-np", "2", "prog"});
  EXPECT_FALSE(with_command.options);
  EXPECT_THAT(with_command.message, HasSubstr("takes no command"));
}

TEST(ParseCommandLineTest, HelpDescribesTheHostOptions) {
  const ParsedCommandLine p = parse({"--help"});
  for (const char* option : {"-H", "--spawner", "--rendezvous-addr", "--topology", "{host}"}) {
    EXPECT_THAT(p.message, HasSubstr(option));
  }
}

TEST(ParseCommandLineTest, HostErrorsAreUsageErrors) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"-H", "a:0", "prog"},
                                             {"-H", "a,a", "prog"},
                                             {"-H", "", "prog"},
                                             {"-H", "a", "--spawner", " ", "prog"},
                                             {"-np", "1", "--rendezvous-addr", "", "prog"},
                                             {"--topology"}}) {
    const ParsedCommandLine p = parse(args);
    EXPECT_FALSE(p.options) << args.front();
    EXPECT_EQ(p.exit_code, kExitUsage);
    EXPECT_THAT(p.message, HasSubstr("hooprun: "));
  }
}

TEST(ParseCommandLineTest, ErrorsAreUsageErrors) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {}, {"prog"}, {"-np", "1"}, {"-np", "0", "prog"}, {"-np", "1", "-x", "prog"}}) {
    const ParsedCommandLine p = parse(args);
    EXPECT_FALSE(p.options);
    EXPECT_EQ(p.exit_code, kExitUsage);
    EXPECT_THAT(p.message, HasSubstr("hooprun: "));
  }
}

TEST(ParseCommandLineTest, ReadsTheClusterOptions) {
  const ParsedCommandLine p = parse({"-H",
                                     "a:2,b:2",
                                     "-p",
                                     "2222",
                                     "-i",
                                     "/keys/id",
                                     "--network-interface",
                                     "eth1",
                                     "--output-filename",
                                     "logs",
                                     "--no-preflight",
                                     "-x",
                                     "FOO",
                                     "--env",
                                     "BAR=1 2",
                                     "prog",
                                     "-p",
                                     "1",
                                     "-i",
                                     "x"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->ssh_port, 2222);
  EXPECT_EQ(p.options->ssh_identity_file, "/keys/id");
  EXPECT_EQ(p.options->network_interface, "eth1");
  EXPECT_EQ(p.options->output_dir, "logs");
  EXPECT_FALSE(p.options->preflight);
  EXPECT_THAT(p.options->env_vars, ElementsAre("FOO", "BAR=1 2"));
  EXPECT_THAT(p.options->command, ElementsAre("prog", "-p", "1", "-i", "x"));
  const ParsedCommandLine defaults = parse({"-np", "1", "prog"});
  ASSERT_TRUE(defaults.options) << defaults.message;
  EXPECT_FALSE(defaults.options->ssh_port || defaults.options->ssh_identity_file ||
               defaults.options->network_interface || defaults.options->output_dir);
  EXPECT_TRUE(defaults.options->preflight);
  EXPECT_TRUE(parse({"-np", "1", "--disable-preflight", "prog"}).options.value().preflight ==
              false);
}

TEST(ParseCommandLineTest, ReadsTheHostfile) {
  const testing::TempFile file("# two hosts\nnode-a slots=2\nnode-b:3\n");
  const std::string& path = file.path();
  const ParsedCommandLine p = parse({"--hostfile", path, "prog"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->num_ranks, 5);
  EXPECT_THAT(p.options->hosts, ElementsAre(HostSlots{"node-a", 2}, HostSlots{"node-b", 3}));
  const ParsedCommandLine too_many = parse({"-np", "6", "--hostfile", path, "prog"});
  EXPECT_THAT(too_many.message, HasSubstr("-np 6 exceeds the 5 slots of the host list (" + path));
  const ParsedCommandLine both = parse({"-H", "a", "--hostfile", path, "prog"});
  EXPECT_FALSE(both.options);
  EXPECT_EQ(both.exit_code, kExitUsage);
  EXPECT_THAT(both.message, HasSubstr("--hosts excludes --hostfile"));
  file.remove();
  const ParsedCommandLine missing = parse({"--hostfile", path, "prog"});
  EXPECT_EQ(missing.exit_code, kExitUsage);
  EXPECT_THAT(missing.message, HasSubstr("cannot read the hostfile '" + path));
}

TEST(ParseCommandLineTest, ClusterOptionErrorsAreUsageErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"-np", "1", "-p", "0", "prog"}, "--ssh-port"},
      {{"-np", "1", "-p", "x", "prog"}, "--ssh-port"},
      {{"-np", "1", "--network-interface", "", "prog"}, "--network-interface is empty"},
      {{"-np", "1", "--output-filename", "", "prog"}, "--output-filename is empty"},
      {{"-np", "1", "-x", "=1", "prog"}, "-x '=1': expected NAME or NAME=VALUE"},
  };
  for (const auto& [args, message] : cases) {
    const ParsedCommandLine p = parse(args);
    EXPECT_FALSE(p.options) << args[3];
    EXPECT_EQ(p.exit_code, kExitUsage) << args[3];
    EXPECT_THAT(p.message, HasSubstr(message)) << args[3];
  }
}

TEST(ParseCommandLineTest, HelpDescribesTheClusterOptions) {
  const ParsedCommandLine p = parse({"--help"});
  for (const char* option :
       {"--hostfile", "--ssh-port", "--ssh-identity-file", "--network-interface",
        "--output-filename", "--disable-preflight", "over ssh", "preflight"}) {
    EXPECT_THAT(p.message, HasSubstr(option));
  }
  EXPECT_THAT(p.message, ::testing::Not(HasSubstr("not supported")));
}

TEST(ParseCommandLineTest, ElasticOptionsNeedADiscoveryScript) {
  const ParsedCommandLine p =
      parse({"-np", "3", "--min-np", "2", "--max-np", "4", "--host-discovery-script", "./d.sh",
             "--elastic-timeout", "60", "--reset-limit", "5", "--slots", "2", "python3", "t.py"});
  ASSERT_TRUE(p.options) << p.message;
  ASSERT_TRUE(p.options->elastic);
  EXPECT_EQ(p.options->num_ranks, 3);
  EXPECT_EQ(p.options->elastic->min_np, 2);
  EXPECT_EQ(p.options->elastic->max_np, 4);
  EXPECT_EQ(p.options->elastic->discovery_script, "./d.sh");
  EXPECT_EQ(p.options->elastic->timeout_s, 60);
  EXPECT_EQ(p.options->elastic->reset_limit, 5);
  EXPECT_EQ(p.options->elastic->default_slots, 2);
  EXPECT_TRUE(p.options->hosts.empty());

  // -np alone is also the minimum; --min-np alone is also the start.
  const ParsedCommandLine np = parse({"-np", "2", "--host-discovery-script", "d", "x"});
  ASSERT_TRUE(np.options) << np.message;
  EXPECT_EQ(np.options->elastic->min_np, 2);
  const ParsedCommandLine min = parse({"--min-np", "2", "--host-discovery-script", "d", "x"});
  ASSERT_TRUE(min.options) << min.message;
  EXPECT_EQ(min.options->num_ranks, 2);

  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"-np", "2", "--min-np", "1", "x"}, "--min-np needs --host-discovery-script"},
           {{"--host-discovery-script", "d", "x"}, "an elastic job needs -np or --min-np"},
           {{"-np", "1", "--min-np", "2", "--host-discovery-script", "d", "x"},
            "-np 1 must lie within --min-np 2"},
           {{"-np", "5", "--max-np", "4", "--host-discovery-script", "d", "x"},
            "-np 5 must lie within --min-np 5 and --max-np 4"},
           {{"-np", "2", "-H", "a:2", "--host-discovery-script", "d", "x"},
            "takes its hosts from the script"},
           {{"-np", "2", "--host-discovery-script", "d", "--elastic-timeout", "0", "x"},
            "--elastic-timeout"}}) {
    const ParsedCommandLine bad = parse(args);
    EXPECT_FALSE(bad.options) << args.front();
    EXPECT_EQ(bad.exit_code, kExitUsage);
    EXPECT_THAT(bad.message, HasSubstr(message));
  }
}

}  // namespace
}  // namespace hoop::launch
