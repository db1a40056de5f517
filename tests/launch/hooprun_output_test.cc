// What the user sees of the ranks' output: prefixed whole lines, stdout and stderr apart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

TEST(HooprunOutputTest, PrefixesEachLineWithItsRankAndKeepsStreamsApart) {
  const RunResult r = run_hooprun(
      sh_job(2,
             "echo out $HOOP_RANK; echo err $HOOP_RANK >&2; printf 'a\\n\\nb\\n'; printf 'tail %s' "
             "$HOOP_RANK"));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(split_lines(r.out),
              UnorderedElementsAre("[0] out 0", "[0] a", "[0] ", "[0] b", "[0] tail 0", "[1] out 1",
                                   "[1] a", "[1] ", "[1] b", "[1] tail 1"));
  EXPECT_THAT(split_lines(r.err), UnorderedElementsAre("[0] err 0", "[1] err 1"));
  // The unfinished last line was ended, so that nothing is glued to it.
  EXPECT_EQ(r.out.back(), '\n');
}

TEST(HooprunOutputTest, KeepsEachRanksLinesWholeAndInOrder) {
  constexpr int kRanks = 4;
  constexpr int kLines = 400;
  const RunResult r = run_hooprun(
      sh_job(kRanks, "p=$(printf '%0200d' 0); i=0; while [ $i -lt " + std::to_string(kLines) +
                         " ]; do echo \"r$HOOP_RANK-$i-$p\"; i=$((i+1)); done"));
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string padding(200, '0');
  std::map<int, int> next_line;
  for (const std::string& line : split_lines(r.out)) {
    // "[R] rR-I-<padding>": anything else is a line cut or mixed with another.
    int rank = -1;
    int echoed_rank = -1;
    int index = -1;
    int consumed = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "[%d] r%d-%d-%n", &rank, &echoed_rank, &index, &consumed),
              3)
        << line;
    ASSERT_EQ(line.substr(static_cast<std::size_t>(consumed)), padding) << line;
    EXPECT_EQ(rank, echoed_rank) << line;
    EXPECT_EQ(next_line[rank]++, index) << line;
  }
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(next_line[rank], kLines) << rank;
}

TEST(HooprunOutputTest, PassesOnALongLineWithoutNewlineInPieces) {
  constexpr std::size_t kBytes = 200000;
  const RunResult r =
      run_hooprun(sh_job(1, "head -c " + std::to_string(kBytes) + " /dev/zero | tr '\\000' x"));
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = split_lines(r.out);
  EXPECT_GE(lines.size(), 3u);
  std::size_t total = 0;
  for (const std::string& line : lines) {
    ASSERT_TRUE(line.starts_with("[0] ")) << line.substr(0, 20);
    const std::string body = line.substr(4);
    EXPECT_EQ(body.find_first_not_of('x'), std::string::npos);
    total += body.size();
  }
  EXPECT_EQ(total, kBytes);
}

TEST(HooprunOutputTest, SilentRanksProduceNoOutput) {
  const RunResult r = run_hooprun({"-np", "3", "true"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, IsEmpty());
}

// Like horovodrun's --output-filename: DIR/rank.N/{stdout,stderr} hold each rank's own bytes,
// unprefixed, while the terminal still gets the prefixed lines.
TEST(HooprunOutputTest, OutputFilenameWritesEachRanksStreamsToItsOwnFiles) {
  TempDir dir;
  const std::string out_dir = dir.file("logs/nested");
  const RunResult r =
      run_hooprun(sh_job(2, "echo out $HOOP_RANK; echo err $HOOP_RANK >&2; printf 'no newline'",
                         {"--output-filename", out_dir}));
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string rank : {"0", "1"}) {
    EXPECT_EQ(read_file(out_dir + "/rank." + rank + "/stdout"), "out " + rank + "\nno newline");
    EXPECT_EQ(read_file(out_dir + "/rank." + rank + "/stderr"), "err " + rank + "\n");
    EXPECT_EQ(count_lines_with(r.out, "[" + rank + "] out " + rank), 1) << r.out;
    EXPECT_EQ(count_lines_with(r.err, "[" + rank + "] err " + rank), 1) << r.err;
  }
}

TEST(HooprunOutputTest, OutputFilenameThatCannotBeCreatedIsNamedBeforeAnyRankStarts) {
  TempDir dir;
  write_file(dir.file("file"), "");
  const std::string out_dir = dir.file("file/logs");
  const RunResult r =
      run_hooprun(sh_job(1, "touch '" + dir.path() + "/started'", {"--output-filename", out_dir}));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("--output-filename: cannot create the directory '" +
                                          out_dir + "'"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("started")));
}

// The last message names the failed rank's host and exit code and repeats the end of its
// stderr; a rank that wrote nothing there is said to have written nothing.
TEST(HooprunOutputTest, TheFinalMessageRepeatsTheEndOfTheFailedRanksStderr) {
  const RunResult r = run_hooprun(
      sh_job(2,
             "if [ $HOOP_RANK = 1 ]; then echo first >&2; echo why it failed >&2; exit 4; fi; "
             "exec sleep 60"));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, ::testing::EndsWith(
                         "exited with code 4; the last 2 lines of its stderr:\n  [1] first\n"
                         "  [1] why it failed\n"));
  EXPECT_THAT(r.err, ::testing::HasSubstr("hooprun: job failed: rank 1 on host localhost ("));
  const RunResult silent = run_hooprun(sh_job(1, "exit 5"));
  EXPECT_THAT(silent.err, ::testing::EndsWith("exited with code 5; it wrote nothing to stderr\n"));
}

/// This machine's name, by which the final message names "localhost" too.
std::string this_host() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "";
}

TEST(HooprunOutputTest, TheFinalMessageQuotesARankThatExplainsWhenTheFirstSaysNothing) {
  // Rank 0 fails first and silently; rank 1 meets the same error a moment later and says why.
  const RunResult r = run_hooprun(sh_job(
      2, "if [ $HOOP_RANK = 0 ]; then exit 2; fi; sleep 0.05; echo bad argument -x >&2; exit 2"));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, ::testing::HasSubstr("job failed: rank 0 on host localhost ("));
  EXPECT_THAT(r.err, ::testing::EndsWith(
                         "exited with code 2; it wrote nothing to stderr; rank 1 on host "
                         "localhost (" + this_host() + ") (pid " +
                         r.err.substr(r.err.rfind("(pid ") + 5,
                                      r.err.rfind(") also") - r.err.rfind("(pid ") - 5) +
                         ") also exited with code 2; the last 1 line of its stderr:\n  [1] bad "
                         "argument -x\n"))
      << r.err;
}

}  // namespace
}  // namespace hoop::launch::testing
