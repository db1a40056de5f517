#include "core/log.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace hoop::log {
namespace {

TEST(Log, ParsesLevels) {
  EXPECT_EQ(parse_level("TRACE"), Level::kTrace);
  EXPECT_EQ(parse_level("warning"), Level::kWarn);
  EXPECT_EQ(parse_level("off"), Level::kOff);
  EXPECT_EQ(parse_level("loud"), std::nullopt);
}

TEST(Log, ThresholdFiltersAndOffSilencesAll) {
  set_level(Level::kInfo);
  EXPECT_FALSE(enabled(Level::kDebug));
  EXPECT_TRUE(enabled(Level::kInfo));
  EXPECT_TRUE(enabled(Level::kError));
  set_level(Level::kOff);
  EXPECT_FALSE(enabled(Level::kError));
  set_level(Level::kWarn);
}

TEST(Log, LinesCarryTheRank) {
  set_rank(7);
  ::testing::internal::CaptureStderr();
  HOOP_LOG(kError, "peer {} lost", 3);
  HOOP_LOG(kDebug, "not shown {}", 1);
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "[hoop 7] E peer 3 lost\n");
  set_rank(-1);
}

TEST(Log, InitFromEnvRejectsUnknownLevel) {
  ::setenv("HOOP_LOG_LEVEL", "loud", 1);
  Status s = init_from_env();
  ::setenv("HOOP_LOG_LEVEL", "debug", 1);
  Status ok = init_from_env();
  ::unsetenv("HOOP_LOG_LEVEL");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("HOOP_LOG_LEVEL='loud'"), std::string::npos) << s.message();
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(level(), Level::kDebug);
  set_level(Level::kWarn);
}

}  // namespace
}  // namespace hoop::log
