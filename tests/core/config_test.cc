#include "core/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

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
                      BadValue{"HOOP_RANK", "-1", "between 0 and"},
                      BadValue{"HOOP_RANK", "1.5", "integer"}, BadValue{"HOOP_RANK", "", "integer"},
                      BadValue{"HOOP_SIZE", "0", "between 1 and"},
                      BadValue{"HOOP_SIZE", "99999999999999999999", "integer"},
                      BadValue{"HOOP_RENDEZVOUS_PORT", "70000", "between 1 and 65535"},
                      BadValue{"HOOP_START_TIMEOUT", "-3", "seconds"},
                      BadValue{"HOOP_START_TIMEOUT", "soon", "seconds"},
                      BadValue{"HOOP_TIMEOUT_SECONDS", "nan", "seconds"},
                      BadValue{"HOOP_ALPHA_US", "-1", "non-negative number"},
                      BadValue{"HOOP_LOG_LEVEL", "loud", "one of trace"},
                      BadValue{"HOROVOD_LOG_LEVEL", "chatty", "one of"},
                      BadValue{"HOROVOD_RANK", "x", "integer"}));

TEST(Config, GetterReportsTheSpellingTheUserSet) {
  auto r = get_int("HOOP_RANK", env_of({{"HOROVOD_RANK", "seven"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("HOROVOD_RANK='seven'"));
}

TEST(Config, UndeclaredOrWrongTypeReadIsAnInternalError) {
  EXPECT_EQ(get_int("HOOP_NOPE", env_of({})).status().code(), StatusCode::kInternal);
  EXPECT_EQ(get_bool("HOOP_RANK", env_of({})).status().code(), StatusCode::kInternal);
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
  // The README's table is generated from the registry; this keeps the two from drifting.
  std::ifstream in(std::string(HOOP_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md not found";
  std::stringstream buf;
  buf << in.rdbuf();
  EXPECT_THAT(buf.str(), HasSubstr(markdown_table()))
      << "regenerate the README's environment table with `build/bin/hooprun --env-table`";
}

}  // namespace
}  // namespace hoop::config
