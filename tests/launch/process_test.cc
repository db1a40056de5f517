#include "launch/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace hoop::launch {
namespace {

class FindExecutableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/hoop_find_exe.XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    dir_ = templ;
    std::filesystem::create_directories(dir_ + "/a");
    std::filesystem::create_directories(dir_ + "/b");
    make_file(dir_ + "/a/tool", 0644);  // shadowed: not executable
    make_file(dir_ + "/b/tool", 0755);
    make_file(dir_ + "/a/locked", 0644);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static void make_file(const std::string& path, unsigned mode) {
    std::ofstream(path) << "#!/bin/sh\n";
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }
  std::string dir_;
};

TEST_F(FindExecutableTest, SearchesPathInOrderForAnExecutableFile) {
  const Result<std::string> found = find_executable("tool", dir_ + "/a:" + dir_ + "/b");
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_EQ(*found, dir_ + "/b/tool");
}

TEST_F(FindExecutableTest, NamesWithASlashAreNotSearched) {
  EXPECT_EQ(find_executable(dir_ + "/b/tool", "").value(), dir_ + "/b/tool");
  EXPECT_EQ(find_executable("b/tool", dir_).status().code(), StatusCode::kNotFound);
}

TEST_F(FindExecutableTest, MissingIsNotFound) {
  const Result<std::string> found = find_executable("no-such-tool", dir_ + "/a:" + dir_ + "/b");
  EXPECT_EQ(found.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(found.status().message(), "cannot execute 'no-such-tool': No such file or directory");
}

TEST_F(FindExecutableTest, NotExecutableIsPermissionDenied) {
  const Result<std::string> found = find_executable("locked", dir_ + "/a:" + dir_ + "/b");
  EXPECT_EQ(found.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(found.status().message(), "cannot execute 'locked': Permission denied");
  EXPECT_EQ(find_executable(dir_, "").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(FindExecutableTest, EmptyPathEntryIsTheCurrentDirectory) {
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_ + "/b");
  const Result<std::string> found = find_executable("tool", "/nonexistent::");
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_EQ(*found, "./tool");
}

TEST(ExitStatusTest, DescribesCodesAndSignals) {
  EXPECT_EQ((ExitStatus{false, 3}).describe(), "exited with code 3");
  EXPECT_EQ((ExitStatus{false, 3}).shell_code(), 3);
  EXPECT_EQ((ExitStatus{true, SIGKILL}).describe(), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ((ExitStatus{true, SIGKILL}).shell_code(), 137);
  EXPECT_TRUE((ExitStatus{false, 0}).success());
  EXPECT_FALSE((ExitStatus{true, 0}).success());
}

TEST(SignalNameTest, NamesKnownSignals) {
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(999), "signal 999");
}

}  // namespace
}  // namespace hoop::launch
