#include "launch/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launch/exit_codes.h"

namespace hoop::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ParsedCommandLine parse(std::vector<std::string> args) { return parse_command_line(args); }

TEST(ParseCommandLineTest, ReadsOptionsAndCommand) {
  const ParsedCommandLine p =
      parse({"-np", "4", "--start-timeout", "2.5", "-v", "python3", "-c", "print(1)"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->num_ranks, 4);
  EXPECT_EQ(p.options->start_timeout_s, 2.5);
  EXPECT_TRUE(p.options->verbose);
  EXPECT_THAT(p.options->command, ElementsAre("python3", "-c", "print(1)"));
}

TEST(ParseCommandLineTest, EnvTablePrintsTheRegistryWithoutNeedingNp) {
  const ParsedCommandLine p = parse({"--env-table"});
  EXPECT_FALSE(p.options);
  EXPECT_EQ(p.exit_code, kExitSuccess);
  EXPECT_THAT(p.message, HasSubstr("| `HOOP_RANK` | `HOROVOD_RANK` |"));
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

TEST(ParseCommandLineTest, ErrorsAreUsageErrors) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {}, {"prog"}, {"-np", "1"}, {"-np", "0", "prog"}, {"-np", "1", "-x", "prog"}}) {
    const ParsedCommandLine p = parse(args);
    EXPECT_FALSE(p.options);
    EXPECT_EQ(p.exit_code, kExitUsage);
    EXPECT_THAT(p.message, HasSubstr("hooprun: "));
  }
}

}  // namespace
}  // namespace hoop::launch
