// hooprun's command line and its checks of its own environment, end to end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class HooprunRankCountSpellingTest : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(HooprunRankCountSpellingTest, StartsTwoRanks) {
  std::vector<std::string> args = GetParam();
  args.insert(args.end(), {"/bin/sh", "-c", "echo size=$HOOP_SIZE"});
  const RunResult r = run_hooprun(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(split_lines(r.out).size(), 2u) << r.out;
  EXPECT_THAT(r.out, HasSubstr("[1] size=2"));
}

INSTANTIATE_TEST_SUITE_P(Spellings, HooprunRankCountSpellingTest,
                         ::testing::Values(std::vector<std::string>{"-np", "2"},
                                           std::vector<std::string>{"-np=2"},
                                           std::vector<std::string>{"-n", "2"},
                                           std::vector<std::string>{"-n2"},
                                           std::vector<std::string>{"--np", "2"},
                                           std::vector<std::string>{"--num-proc", "2"},
                                           std::vector<std::string>{"--num-proc=2"},
                                           std::vector<std::string>{"-np", "2", "--"},
                                           std::vector<std::string>{"--verbose", "-np", "2"}));

class HooprunCommandArgsTest : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(HooprunCommandArgsTest, BelongToTheCommand) {
  // Arguments that look like hooprun's own options reach the command untouched.
  const RunResult r = run_hooprun(GetParam());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(split_lines(r.out), ElementsAre("[0] -np 3 --verbose -c --help"));
  EXPECT_THAT(r.err, IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(
    Forms, HooprunCommandArgsTest,
    ::testing::Values(std::vector<std::string>{"-np", "1", "/bin/sh", "-c", "echo \"$@\"", "x",
                                               "-np", "3", "--verbose", "-c", "--help"},
                      std::vector<std::string>{"-np", "1", "--", "/bin/sh", "-c", "echo \"$@\"",
                                               "x", "-np", "3", "--verbose", "-c", "--help"},
                      std::vector<std::string>{"--start-timeout", "5", "-np", "1", "sh", "-c",
                                               "echo \"$@\"", "x", "-np", "3", "--verbose", "-c",
                                               "--help"}));

struct BadArgsCase {
  std::string name;
  std::vector<std::string> args;
  std::string complaint;
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const BadArgsCase& c, std::ostream* os) { *os << c.name; }

class HooprunBadArgsTest : public ::testing::TestWithParam<BadArgsCase> {};

TEST_P(HooprunBadArgsTest, ExitsWithUsageError) {
  const RunResult r = run_hooprun(GetParam().args);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(GetParam().complaint));
  EXPECT_THAT(r.err, HasSubstr("hooprun --help"));
  EXPECT_THAT(r.out, IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HooprunBadArgsTest,
    ::testing::Values(BadArgsCase{"Nothing", {}, "np"}, BadArgsCase{"NoRankCount", {"true"}, "np"},
                      BadArgsCase{"NoCommand", {"-np", "2"}, "no command given"},
                      BadArgsCase{"NoCommandAfterDashes", {"-np", "2", "--"}, "no command given"},
                      BadArgsCase{"ZeroRanks", {"-np", "0", "true"}, "np"},
                      BadArgsCase{"NegativeRanks", {"-np", "-1", "true"}, "np"},
                      BadArgsCase{"RankCountNotANumber", {"-np", "two", "true"}, "two"},
                      BadArgsCase{"UnknownOption", {"--bogus", "-np", "2", "true"}, "--bogus"},
                      BadArgsCase{"ZeroStartTimeout",
                                  {"-np", "2", "--start-timeout", "0", "true"},
                                  "start-timeout"},
                      BadArgsCase{"NegativeStartTimeout",
                                  {"-np", "2", "--start-timeout", "-3", "true"},
                                  "start-timeout"},
                      BadArgsCase{"InfiniteStartTimeout",
                                  {"-np", "2", "--start-timeout", "inf", "true"},
                                  "start-timeout"}),
    [](const ::testing::TestParamInfo<BadArgsCase>& p) { return p.param.name; });

TEST(HooprunCliTest, HelpDescribesTheOptionsAndEndsWithTheEnvironment) {
  const RunResult r = run_hooprun({"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* expected : {"-np", "--num-proc", "--start-timeout", "--verbose", "HOOP_RANK",
                               "HOOP_SECRET", "HOOP_START_TIMEOUT", "HOOP_LOG_LEVEL"}) {
    EXPECT_THAT(r.out, HasSubstr(expected));
  }
  std::vector<std::string> lines = split_lines(r.out);
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.back(), HasSubstr("HOOP_")) << "the variable list is not last";
  EXPECT_LT(r.out.find("--start-timeout"), r.out.find("HOOP_RANK"));
}

struct MalformedEnvCase {
  std::string setting;  // NAME=value
  std::string name;
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const MalformedEnvCase& c, std::ostream* os) { *os << c.setting; }

class HooprunMalformedEnvTest : public ::testing::TestWithParam<MalformedEnvCase> {};

TEST_P(HooprunMalformedEnvTest, RefusesToStart) {
  const RunResult r =
      run_hooprun({"-np", "2", "/bin/sh", "-c", "echo started"}, {GetParam().setting});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string value = GetParam().setting.substr(GetParam().setting.find('=') + 1);
  EXPECT_THAT(r.err, HasSubstr(GetParam().name));
  EXPECT_THAT(r.err, HasSubstr(value));
  EXPECT_THAT(r.out, Not(HasSubstr("started")));
}

INSTANTIATE_TEST_SUITE_P(
    Variables, HooprunMalformedEnvTest,
    ::testing::Values(MalformedEnvCase{"HOOP_LOG_LEVEL=loud", "HOOP_LOG_LEVEL"},
                      MalformedEnvCase{"HOROVOD_LOG_LEVEL=loud", "HOROVOD_LOG_LEVEL"},
                      MalformedEnvCase{"HOOP_START_TIMEOUT=soon", "HOOP_START_TIMEOUT"},
                      MalformedEnvCase{"HOOP_START_TIMEOUT=0", "HOOP_START_TIMEOUT"}));

// A second Python on PATH that has neither torch nor hoop: the system's, isolated from its
// site-packages and from PYTHONPATH.
class HooprunPythonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // What hooprun points at (the build's package, its interpreter) exists only in a build
    // with the Python adapter, which the sanitizer build leaves out.
    if (!std::filesystem::is_directory(std::string(HOOP_PYTHON_DIR) + "/hoop"))
      GTEST_SKIP() << "this build has no Python package (" << HOOP_PYTHON_DIR << "/hoop)";
    write_file(dir_.file("python3"), "#!/bin/sh\nexec /usr/bin/python3 -I -S \"$@\"\n", 0755);
    write_file(dir_.file("uses_torch.py"), "import os\nimport torch\nimport hoop.torch as hvd\n");
    write_file(dir_.file("plain.py"), "print('plain python')\n");
  }
  std::string path_env() const { return "PATH=" + dir_.path() + ":" + std::getenv("PATH"); }
  TempDir dir_;
};

TEST_F(HooprunPythonTest, AnInterpreterWithoutTorchIsNamedWithTheOneThatHasIt) {
  const RunResult r =
      run_hooprun({"-np", "2", "python3", dir_.file("uses_torch.py")}, {path_env()});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("python3 (" + dir_.file("python3") +
                               ") cannot import torch and "
                               "hoop, which " +
                               dir_.file("uses_torch.py") + " imports"));
  EXPECT_THAT(r.err, HasSubstr("the interpreter hoop was built for, has torch"));
  EXPECT_THAT(r.err, HasSubstr("PYTHONPATH="));
  EXPECT_THAT(r.out, IsEmpty());  // no rank started
}

TEST_F(HooprunPythonTest, ScriptsThatImportNeitherRunWithAnyPython) {
  const RunResult r = run_hooprun({"-np", "1", "python3", dir_.file("plain.py")}, {path_env()});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("plain python"));
}

TEST_F(HooprunPythonTest, TheBuiltInterpreterWithoutPythonpathIsToldWhereHoopIs) {
  const RunResult r =
      run_hooprun({"-np", "1", "/usr/bin/python3", "-c", "import hoop.torch"}, {"PYTHONPATH="});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot import hoop, which -c imports"));
  EXPECT_THAT(r.err, HasSubstr("hoop's package is in "));
}

}  // namespace
}  // namespace hoop::launch::testing
