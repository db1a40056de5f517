// What the user sees of the ranks' output: prefixed whole lines, stdout and stderr apart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
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

}  // namespace
}  // namespace hoop::launch::testing
