// The registry of every HOOP_* environment variable: declared once, with its type, default,
// Horovod alias and doc line. Readers go through the typed getters below, which check the
// value strictly; a malformed value is an error naming the variable and the value.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hoop/core.h"

namespace hoop::config {

/// The longest duration any seconds variable accepts (a year): beyond every real timeout, and
/// small enough that the value in nanoseconds still fits a std::chrono duration.
inline constexpr std::int64_t kMaxSeconds = std::int64_t{365} * 24 * 3600;

enum class VarType {
  kString,
  kInt,      // decimal integer in [min, max]
  kBytes,    // integer with an optional K/M/G/T suffix (powers of 1024), in [min, max]
  kSeconds,  // decimal number of seconds in [min, max] (or (min, max]), max <= kMaxSeconds
  kNumber,   // decimal number in the unit the name gives (HOOP_ALPHA_US), in [min, max]
  kBool,     // 1/0, true/false, yes/no, on/off
  kEnum,     // one of `choices` (comma-separated)
};

/// Whether a variable of this type holds a number (and so declares a range).
constexpr bool is_numeric(VarType type) {
  return type == VarType::kInt || type == VarType::kBytes || type == VarType::kSeconds ||
         type == VarType::kNumber;
}

struct Var {
  std::string_view name;           // HOOP_...
  std::string_view horovod_alias;  // HOROVOD_... or empty
  VarType type;
  std::string_view default_value;  // empty: no default
  std::string_view doc;
  std::string_view choices = {};  // kEnum only
  // kInt, kBytes, kSeconds, kNumber: the accepted range, [min, max], or (min, max] with
  // min_exclusive (a duration where 0 means nothing). Every numeric variable declares one (a
  // static_assert checks it), so that no accepted value overflows where it is converted.
  std::int64_t min = 0;
  std::int64_t max = 0;
  bool min_exclusive = false;
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
/// declared default; not_found when neither exists; invalid_argument when malformed or out
/// of the declared range, with a message naming the variable as set, its value and what is
/// accepted, so that callers pass the error on as it is.
Result<std::string> get_string(std::string_view name, const EnvLookup& env = process_env());
Result<std::int64_t> get_int(std::string_view name, const EnvLookup& env = process_env());
Result<double> get_seconds(std::string_view name, const EnvLookup& env = process_env());
Result<double> get_number(std::string_view name, const EnvLookup& env = process_env());
/// A kSeconds variable as milliseconds, rounded up so that a positive value never becomes 0.
Result<std::chrono::milliseconds> get_milliseconds(std::string_view name,
                                                   const EnvLookup& env = process_env());
Result<bool> get_bool(std::string_view name, const EnvLookup& env = process_env());

/// Checks every declared variable that is set; the first malformed one is the error.
Status validate_env(const EnvLookup& env = process_env());

/// What `var` accepts, as its errors say it: "a number of seconds in (0, 31536000]".
std::string accepted(const Var& var);

/// The variables as a Markdown table (README) and as plain text (hooprun --help).
std::string markdown_table();
std::string help_text();

}  // namespace hoop::config
