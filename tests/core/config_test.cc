#include "core/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace hoop::config {
namespace {

using ::testing::HasSubstr;

// An environment made of a fixed map, so tests never depend on the real one.
EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Config, EveryVariableIsDeclaredOnceWithDocAndPrefix) {
  std::set<std::string_view> names;
  for (const Var& v : all_vars()) {
    EXPECT_TRUE(v.name.starts_with("HOOP_")) << v.name;
    EXPECT_TRUE(v.horovod_alias.empty() || v.horovod_alias.starts_with("HOROVOD_")) << v.name;
    EXPECT_FALSE(v.doc.empty()) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << "declared twice: " << v.name;
    EXPECT_EQ(find_var(v.name), &v);
  }
  EXPECT_EQ(find_var("HOOP_NOT_A_VARIABLE"), nullptr);
}

TEST(Config, DefaultsParseWithTheirOwnType) {
  // A default that its own parser rejects would make every job fail at startup.
  for (const Var& v : all_vars()) {
    if (v.default_value.empty()) continue;
    auto env = env_of({{std::string(v.name), std::string(v.default_value)}});
    EXPECT_TRUE(validate_env(env).ok()) << v.name << "=" << v.default_value;
  }
}

TEST(Config, ReadsValueAliasAndDefault) {
  EXPECT_EQ(get_int("HOOP_RANK", env_of({{"HOOP_RANK", "3"}})).value(), 3);
  EXPECT_EQ(get_int("HOOP_RANK", env_of({{"HOROVOD_RANK", "5"}})).value(), 5);
  // HOOP_ wins over the Horovod alias.
  EXPECT_EQ(get_int("HOOP_RANK", env_of({{"HOOP_RANK", "1"}, {"HOROVOD_RANK", "2"}})).value(), 1);
  EXPECT_EQ(get_seconds("HOOP_START_TIMEOUT", env_of({})).value(), 30.0);
  EXPECT_EQ(get_seconds("HOOP_START_TIMEOUT", env_of({{"HOOP_START_TIMEOUT", "2.5"}})).value(),
            2.5);
  EXPECT_EQ(get_string("HOOP_LOG_LEVEL", env_of({{"HOOP_LOG_LEVEL", " DEBUG "}})).value(), "debug");
  EXPECT_TRUE(is_set("HOOP_RANK", env_of({{"HOROVOD_RANK", "0"}})));
  EXPECT_FALSE(is_set("HOOP_RANK", env_of({})));
}

TEST(Config, UnsetWithoutDefaultIsNotFound) {
  auto r = get_int("HOOP_RANK", env_of({}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("HOOP_RANK"));
}

struct BadValue {
  std::string name;
  std::string value;
  std::string expected_words;
};

void PrintTo(const BadValue& v, std::ostream* os) { *os << v.name << "='" << v.value << "'"; }

class ConfigBadValue : public ::testing::TestWithParam<BadValue> {};

TEST_P(ConfigBadValue, IsAnErrorNamingVariableAndValue) {
  const BadValue& p = GetParam();
  auto env = env_of({{p.name, p.value}});
  Status s = validate_env(env);
  ASSERT_FALSE(s.ok()) << p.name << "=" << p.value;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(p.name));
  EXPECT_THAT(s.message(), HasSubstr("'" + p.value + "'"));
  EXPECT_THAT(s.message(), HasSubstr(p.expected_words));
}

INSTANTIATE_TEST_SUITE_P(
    Values, ConfigBadValue,
    ::testing::Values(BadValue{"HOOP_RANK", "abc", "integer"},
                      BadValue{"HOOP_RANK", "-1", "an integer in [0, 2147483647]"},
                      BadValue{"HOOP_RANK", "1.5", "integer"}, BadValue{"HOOP_RANK", "", "integer"},
                      BadValue{"HOOP_SIZE", "0", "an integer in [1, 2147483647]"},
                      BadValue{"HOOP_SIZE", "99999999999999999999", "integer"},
                      BadValue{"HOOP_RENDEZVOUS_PORT", "70000", "an integer in [1, 65535]"},
                      BadValue{"HOOP_START_TIMEOUT", "-3", "seconds in (0, 31536000]"},
                      BadValue{"HOOP_START_TIMEOUT", "soon", "seconds"},
                      BadValue{"HOOP_TIMEOUT_SECONDS", "nan", "seconds"},
                      BadValue{"HOOP_TIMEOUT_SECONDS", "1e300", "seconds in (0, 31536000]"},
                      BadValue{"HOOP_TIMEOUT_SECONDS", "0", "seconds in (0, 31536000]"},
                      BadValue{"HOROVOD_GLOO_TIMEOUT_SECONDS", "0", "seconds in (0, 31536000]"},
                      BadValue{"HOOP_STALL_SHUTDOWN_SECONDS", "inf", "seconds in [0, 31536000]"},
                      BadValue{"HOOP_ALPHA_US", "-1", "a number in [0, 1000000]"},
                      BadValue{"HOOP_SHM_RING_BYTES", "65535", "in [64K, 1G]"},
                      BadValue{"HOOP_FUSION_THRESHOLD", "16777216T", "in [0, 1T]"},
                      BadValue{"HOOP_LOG_LEVEL", "loud", "one of trace"},
                      BadValue{"HOROVOD_LOG_LEVEL", "chatty", "one of"},
                      BadValue{"HOROVOD_RANK", "x", "integer"}));

TEST(Config, TheMessageNamesVariableValueAndRange) {
  Status s = validate_env(env_of({{"HOOP_TIMEOUT_SECONDS", "1e300"}}));
  EXPECT_EQ(s.message(),
            "HOOP_TIMEOUT_SECONDS='1e300' is malformed: expected a number of seconds in "
            "(0, 31536000]");
}

bool is_numeric(const Var& v) {
  return v.type == VarType::kInt || v.type == VarType::kBytes || v.type == VarType::kSeconds ||
         v.type == VarType::kNumber;
}

// Values no numeric variable accepts, whatever its range: junk, trailing junk, signs below
// every range, NaN, infinity, and numbers that overflow every conversion.
constexpr const char* kNeverNumeric[] = {"abc", "5x",    "-1",    "nan",  "inf",
                                         "",    "1e300", "1e400", "0x10", "9223372036854775808"};

TEST(Config, EveryNumericVariableRefusesMalformedValuesNamingItAndTheRange) {
  int checked = 0;
  for (const Var& v : all_vars()) {
    if (!is_numeric(v)) continue;
    std::vector<std::string> bad(std::begin(kNeverNumeric), std::end(kNeverNumeric));
    // Zero where it means nothing, and just past the top of the range.
    if (v.min > 0 || v.min_exclusive) bad.push_back("0");
    const bool integral = v.type == VarType::kInt || v.type == VarType::kBytes;
    bad.push_back(integral ? std::to_string(v.max + 1) : std::to_string(v.max) + ".5");
    bad.push_back(std::to_string(v.max) + "1");
    for (std::string_view spelling : {v.name, v.horovod_alias}) {
      if (spelling.empty()) continue;
      for (const std::string& value : bad) {
        SCOPED_TRACE(std::string(spelling) + "=" + value);
        const std::string name(spelling);
        const auto env = env_of({{name, value}});
        // validate_env and the getter the library reads the variable with say the same.
        Status s = validate_env(env);
        Status got = v.type == VarType::kSeconds  ? get_seconds(v.name, env).status()
                     : v.type == VarType::kNumber ? get_number(v.name, env).status()
                                                  : get_int(v.name, env).status();
        for (const Status& status : {s, got}) {
          ASSERT_FALSE(status.ok());
          EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
          EXPECT_THAT(status.message(), HasSubstr(name + "='" + value + "'"));
          EXPECT_THAT(status.message(), HasSubstr(accepted(v)));
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(Config, EveryNumericVariableAcceptsTheEndsOfItsRange) {
  for (const Var& v : all_vars()) {
    if (!is_numeric(v)) continue;
    std::vector<std::string> good = {std::to_string(v.max)};
    if (!v.min_exclusive) good.push_back(std::to_string(v.min));
    for (const std::string& value : good) {
      EXPECT_TRUE(validate_env(env_of({{std::string(v.name), value}})).ok())
          << v.name << "=" << value;
    }
  }
}

TEST(Config, SecondsBecomeMillisecondsWithoutOverflowOrRoundingToZero) {
  auto ms = [](const std::string& value) {
    return get_milliseconds("HOOP_TIMEOUT_SECONDS", env_of({{"HOOP_TIMEOUT_SECONDS", value}}));
  };
  EXPECT_EQ(ms("2.5").value(), std::chrono::milliseconds(2500));
  EXPECT_EQ(ms(" 1e-9 ").value(), std::chrono::milliseconds(1));
  EXPECT_EQ(ms("31536000").value(), std::chrono::milliseconds(31536000000));
  EXPECT_THAT(ms("31536000.5").status().message(), HasSubstr("(0, 31536000]"));
  EXPECT_EQ(get_milliseconds("HOOP_TIMEOUT_SECONDS", env_of({})).value(), std::chrono::seconds(30));
}

TEST(Config, AStallEndsTheJobAfterTenMinutesByDefault) {
  EXPECT_EQ(get_milliseconds("HOOP_STALL_SHUTDOWN_SECONDS", env_of({})).value(),
            std::chrono::minutes(10));
  EXPECT_EQ(get_milliseconds("HOOP_STALL_SHUTDOWN_SECONDS",
                             env_of({{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "0"}}))
                .value(),
            std::chrono::milliseconds(0));
}

TEST(Config, GetterReportsTheSpellingTheUserSet) {
  auto r = get_int("HOOP_RANK", env_of({{"HOROVOD_RANK", "seven"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("HOROVOD_RANK='seven'"));
}

TEST(Config, UndeclaredOrWrongTypeReadIsAnInternalError) {
  EXPECT_EQ(get_int("HOOP_NOPE", env_of({})).status().code(), StatusCode::kInternal);
  EXPECT_EQ(get_bool("HOOP_RANK", env_of({})).status().code(), StatusCode::kInternal);
}

// Sets (or, with nullopt, clears) one variable of the process environment for one scope: the
// public readers read nothing else.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }

 private:
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  std::string name_;
  std::optional<std::string> old_;
};

TEST(Config, ThePublicReaderReadsAsHoopDoes) {
  {
    ScopedEnv rank("HOOP_RANK", std::nullopt);
    ScopedEnv alias("HOROVOD_RANK", "4");
    EXPECT_EQ(config_value("HOOP_RANK").value(), "4");
  }
  {
    ScopedEnv level("HOOP_LOG_LEVEL", std::nullopt);
    ScopedEnv alias("HOROVOD_LOG_LEVEL", std::nullopt);
    EXPECT_EQ(config_value("HOOP_LOG_LEVEL").value(), "warn");
    EXPECT_EQ(config_default("HOOP_LOG_LEVEL").value(), "warn");
  }
  {
    ScopedEnv level("HOOP_LOG_LEVEL", " Debug ");
    EXPECT_EQ(config_value("HOOP_LOG_LEVEL").value(), "debug");
    EXPECT_EQ(config_default("HOOP_LOG_LEVEL").value(), "warn");
  }
  {
    ScopedEnv threshold("HOOP_FUSION_THRESHOLD", "64M");
    EXPECT_EQ(config_value("HOOP_FUSION_THRESHOLD").value(), "64M");
  }
}

TEST(Config, ThePublicReaderNamesTheVariableInEveryError) {
  {
    ScopedEnv rank("HOOP_RANK", "seven");
    const Status s = config_value("HOOP_RANK").status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("HOOP_RANK='seven'"));
  }
  {
    ScopedEnv rank("HOOP_RANK", std::nullopt);
    ScopedEnv alias("HOROVOD_RANK", std::nullopt);
    const Status s = config_value("HOOP_RANK").status();
    EXPECT_EQ(s.code(), StatusCode::kNotFound);
    EXPECT_THAT(s.message(), HasSubstr("HOOP_RANK"));
    EXPECT_EQ(config_default("HOOP_RANK").status().code(), StatusCode::kNotFound);
  }
  // Not one of hoop's: the caller's mistake, not an internal error.
  for (const Status& s :
       {config_value("HOOP_NOPE").status(), config_default("HOOP_NOPE").status()}) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("HOOP_NOPE"));
  }
}

TEST(Config, HelpAndMarkdownListEveryVariable) {
  const std::string help = help_text();
  const std::string table = markdown_table();
  for (const Var& v : all_vars()) {
    EXPECT_THAT(help, HasSubstr(std::string(v.name)));
    EXPECT_THAT(table, HasSubstr("`" + std::string(v.name) + "`"));
  }
}

TEST(Config, ReadmeTableMatchesTheRegistry) {
  // The user guide's environment table (docs/guide/environment.md, linked from the README) is
  // generated from the registry; this keeps the two from drifting.
  std::ifstream in(std::string(HOOP_SOURCE_DIR) + "/docs/guide/environment.md");
  ASSERT_TRUE(in) << "docs/guide/environment.md not found";
  std::stringstream buf;
  buf << in.rdbuf();
  EXPECT_THAT(buf.str(), HasSubstr(markdown_table()))
      << "regenerate the environment table of docs/guide/environment.md with "
         "`build/bin/hooprun --env-table`";
}

}  // namespace
}  // namespace hoop::config
