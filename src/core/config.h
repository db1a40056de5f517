// The registry of every HOOP_* environment variable: declared once, with its type, default,
// Horovod alias and doc line. Readers go through the typed getters below, which check the
// value strictly; a malformed value is an error naming the variable and the value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hoop/core.h"

namespace hoop::config {

enum class VarType {
  kString,
  kInt,      // decimal integer within [min, max]
  kBytes,    // integer with an optional K/M/G/T suffix (powers of 1024)
  kSeconds,  // non-negative decimal number of seconds
  kNumber,   // non-negative decimal number in the unit the name gives (HOOP_ALPHA_US)
  kBool,     // 1/0, true/false, yes/no, on/off
  kEnum,     // one of `choices` (comma-separated)
};

struct Var {
  std::string_view name;           // HOOP_...
  std::string_view horovod_alias;  // HOROVOD_... or empty
  VarType type;
  std::string_view default_value;  // empty: no default
  std::string_view doc;
  std::string_view choices = {};  // kEnum only
  std::int64_t min = INT64_MIN;   // kInt only
  std::int64_t max = INT64_MAX;   // kInt only
};

/// Every variable hoop reads, in documentation order.
std::span<const Var> all_vars();
/// The declaration of `name` (a HOOP_* name), or nullptr.
const Var* find_var(std::string_view name);

/// Looks a variable up by name; the default reads the process environment.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;
EnvLookup process_env();

/// True when `name` or its Horovod alias is set in `env`.
bool is_set(std::string_view name, const EnvLookup& env = process_env());

/// Typed getters: the value from `env` (HOOP_ name first, then the Horovod alias), else the
/// declared default; not_found when neither exists; invalid_argument when malformed.
Result<std::string> get_string(std::string_view name, const EnvLookup& env = process_env());
Result<std::int64_t> get_int(std::string_view name, const EnvLookup& env = process_env());
Result<double> get_seconds(std::string_view name, const EnvLookup& env = process_env());
Result<double> get_number(std::string_view name, const EnvLookup& env = process_env());
Result<bool> get_bool(std::string_view name, const EnvLookup& env = process_env());

/// Checks every declared variable that is set; the first malformed one is the error.
Status validate_env(const EnvLookup& env = process_env());

/// The variables as a Markdown table (README) and as plain text (hooprun --help).
std::string markdown_table();
std::string help_text();

}  // namespace hoop::config
