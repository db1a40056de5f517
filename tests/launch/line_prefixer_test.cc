#include <gtest/gtest.h>

#include "launch/output.h"

namespace hoop::launch {
namespace {

TEST(LinePrefixerTest, PrefixesCompleteLines) {
  LinePrefixer p("[3] ");
  EXPECT_EQ(p.feed("a\nbc\n\n"), "[3] a\n[3] bc\n[3] \n");
  EXPECT_EQ(p.pending(), 0u);
  EXPECT_EQ(p.finish(), "");
}

TEST(LinePrefixerTest, JoinsALineSplitAcrossReads) {
  LinePrefixer p("[0] ");
  EXPECT_EQ(p.feed("hel"), "");
  EXPECT_EQ(p.feed(""), "");
  EXPECT_EQ(p.feed("lo\nwor"), "[0] hello\n");
  EXPECT_EQ(p.pending(), 3u);
  EXPECT_EQ(p.feed("ld\n"), "[0] world\n");
}

TEST(LinePrefixerTest, FinishEndsTheUnfinishedLine) {
  LinePrefixer p("[1] ");
  EXPECT_EQ(p.feed("done\ntail"), "[1] done\n");
  EXPECT_EQ(p.finish(), "[1] tail\n");
  EXPECT_EQ(p.finish(), "");
}

TEST(LinePrefixerTest, CutsLinesThatOutgrowTheLimit) {
  LinePrefixer p("> ", 4);
  EXPECT_EQ(p.feed("abcdefghij"), "> abcd\n> efgh\n");
  EXPECT_EQ(p.pending(), 2u);
  EXPECT_EQ(p.feed("k\n"), "> ijk\n");
  EXPECT_EQ(p.feed("abcd"), "> abcd\n");
  EXPECT_EQ(p.finish(), "");
}

TEST(LinePrefixerTest, DefaultLimitHoldsOrdinaryLines) {
  LinePrefixer p("");
  const std::string line(kMaxPendingLineBytes - 1, 'x');
  EXPECT_EQ(p.feed(line), "");
  EXPECT_EQ(p.feed("y"), line + "y\n");
}

TEST(FormatCommandTest, QuotesWhatTheShellWouldSplit) {
  EXPECT_EQ(format_command({"python3", "-c", "print('hi there')", "--lr=0.1"}),
            R"(python3 -c 'print('\''hi there'\'')' --lr=0.1)");
  EXPECT_EQ(format_command({"a", ""}), "a ''");
}

TEST(TailLinesTest, KeepsTheLastLinesAcrossReadsWithTheUnfinishedOne) {
  TailLines tail(3);
  EXPECT_TRUE(tail.lines().empty());
  tail.feed("a\nb");
  tail.feed("c\n\nd\ne");
  EXPECT_EQ(tail.lines(), (std::vector<std::string>{"", "d", "e"}));
  tail.feed("\n");
  EXPECT_EQ(tail.lines(), (std::vector<std::string>{"", "d", "e"}));
  tail.feed("f\n");
  EXPECT_EQ(tail.lines(), (std::vector<std::string>{"d", "e", "f"}));
}

TEST(TailLinesTest, CutsAVeryLongLine) {
  TailLines tail(2);
  tail.feed(std::string(TailLines::kMaxLineBytes + 10, 'x'));
  tail.feed("yyy\nz\n");
  EXPECT_EQ(tail.lines(),
            (std::vector<std::string>{std::string(TailLines::kMaxLineBytes, 'x'), "z"}));
}

}  // namespace
}  // namespace hoop::launch
