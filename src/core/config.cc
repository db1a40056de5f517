#include "core/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

namespace hoop::config {
namespace {

using enum VarType;


std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view s) {
  auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// Where a value came from, so that errors name the variable the user actually set.
struct Lookup {
  std::string var_name;
  std::string value;
};

std::optional<Lookup> look_up(const Var& var, const EnvLookup& env) {
  if (auto v = env(var.name)) return Lookup{std::string(var.name), *v};
  if (!var.horovod_alias.empty())
    if (auto v = env(var.horovod_alias)) return Lookup{std::string(var.horovod_alias), *v};
  return std::nullopt;
}

// 4194304 as 4M: byte bounds read as the values users write.
std::string bytes_text(std::int64_t n) {
  for (auto [shift, suffix] : {std::pair{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}}) {
    const std::int64_t unit = std::int64_t{1} << shift;
    if (n != 0 && n % unit == 0) return fmt::format("{}{}", n / unit, suffix);
  }
  return std::to_string(n);
}

std::string range_text(const Var& var) {
  if (var.type == kBytes) return fmt::format("[{}, {}]", bytes_text(var.min), bytes_text(var.max));
  return fmt::format("{}{}, {}]", var.min_exclusive ? '(' : '[', var.min, var.max);
}

Status malformed(const Var& var, const Lookup& l) {
  return invalid_argument(
      fmt::format("{}='{}' is malformed: expected {}", l.var_name, l.value, accepted(var)));
}

Result<std::int64_t> parse_int(const Var& var, const Lookup& l) {
  const std::string text = trim(l.value);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < var.min ||
      value > var.max)
    return malformed(var, l);
  return value;
}

Result<std::int64_t> parse_bytes(const Var& var, const Lookup& l) {
  const std::string text = trim(l.value);
  std::uint64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, value);
  if (text.empty() || ec != std::errc()) return malformed(var, l);
  std::string suffix = lower(std::string_view(end, static_cast<std::size_t>(last - end)));
  if (!suffix.empty() && suffix.back() == 'b') suffix.pop_back();
  if (suffix.size() == 2 && suffix[1] == 'i') suffix.pop_back();  // KiB, MiB, ...
  int shift = 0;
  if (suffix == "k")
    shift = 10;
  else if (suffix == "m")
    shift = 20;
  else if (suffix == "g")
    shift = 30;
  else if (suffix == "t")
    shift = 40;
  else if (!suffix.empty())
    return malformed(var, l);
  // Compared before shifting, so that no value wraps into the range.
  if (value > (static_cast<std::uint64_t>(var.max) >> shift)) return malformed(var, l);
  const auto bytes = static_cast<std::int64_t>(value << shift);
  if (bytes < var.min) return malformed(var, l);
  return bytes;
}

// kSeconds and kNumber: NaN, infinities, values out of double's range and trailing junk are
// malformed like values outside the declared range.
Result<double> parse_decimal(const Var& var, const Lookup& l) {
  const std::string text = trim(l.value);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value))
    return malformed(var, l);
  const auto min = static_cast<double>(var.min);
  const bool above_min = var.min_exclusive ? value > min : value >= min;
  if (!above_min || value > static_cast<double>(var.max)) return malformed(var, l);
  return value;
}

Result<bool> parse_bool(const Var& var, const Lookup& l) {
  const std::string text = lower(trim(l.value));
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return false;
  return malformed(var, l);
}

Result<std::string> parse_enum(const Var& var, const Lookup& l) {
  const std::string text = lower(trim(l.value));
  std::string_view choices = var.choices;
  while (!choices.empty()) {
    const std::size_t comma = choices.find(',');
    if (choices.substr(0, comma) == text) return text;
    if (comma == std::string_view::npos) break;
    choices.remove_prefix(comma + 1);
  }
  return malformed(var, l);
}

// Checks the value against the variable's type without converting it.
Status check(const Var& var, const Lookup& l) {
  switch (var.type) {
    case kString:
      return Status::success();
    case kInt:
      return parse_int(var, l).status();
    case kBytes:
      return parse_bytes(var, l).status();
    case kSeconds:
    case kNumber:
      return parse_decimal(var, l).status();
    case kBool:
      return parse_bool(var, l).status();
    case kEnum:
      return parse_enum(var, l).status();
  }
  return internal_error("unknown variable type");
}

// The value of `name` (env, alias, or default) checked against its declared type.
Result<Lookup> resolve(std::string_view name, VarType expected, const EnvLookup& env) {
  const Var* var = find_var(name);
  if (var == nullptr) return internal_error(fmt::format("{} is not a declared variable", name));
  const bool compatible = var->type == expected || (expected == kString && var->type == kEnum) ||
                          (expected == kInt && var->type == kBytes);
  if (!compatible) return internal_error(fmt::format("{} read with the wrong type", name));
  if (auto l = look_up(*var, env)) return *l;
  if (var->default_value.empty()) return not_found(fmt::format("{} is not set", name));
  return Lookup{std::string(var->name), std::string(var->default_value)};
}

// The accepts column of the README's table: the type, with the range of a numeric one.
std::string type_text(const Var& var) {
  switch (var.type) {
    case kString:
      return "string";
    case kInt:
      return "integer in " + range_text(var);
    case kBytes:
      return "bytes in " + range_text(var);
    case kSeconds:
      return "seconds in " + range_text(var);
    case kNumber:
      return "number in " + range_text(var);
    case kBool:
      return "boolean";
    case kEnum:
      return fmt::format("one of {}", var.choices);
  }
  return "?";
}

}  // namespace

const Var* find_var(std::string_view name) {
  for (const Var& v : all_vars())
    if (v.name == name) return &v;
  return nullptr;
}

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

bool is_set(std::string_view name, const EnvLookup& env) {
  const Var* var = find_var(name);
  return var != nullptr && look_up(*var, env).has_value();
}

Result<std::string> get_string(std::string_view name, const EnvLookup& env) {
  HOOP_ASSIGN_OR_RETURN(Lookup l, resolve(name, kString, env));
  const Var& var = *find_var(name);
  if (var.type == kEnum) return parse_enum(var, l);
  return l.value;
}

Result<std::int64_t> get_int(std::string_view name, const EnvLookup& env) {
  HOOP_ASSIGN_OR_RETURN(Lookup l, resolve(name, kInt, env));
  const Var& var = *find_var(name);
  return var.type == kBytes ? parse_bytes(var, l) : parse_int(var, l);
}

Result<double> get_seconds(std::string_view name, const EnvLookup& env) {
  HOOP_ASSIGN_OR_RETURN(Lookup l, resolve(name, kSeconds, env));
  return parse_decimal(*find_var(name), l);
}

Result<std::chrono::milliseconds> get_milliseconds(std::string_view name, const EnvLookup& env) {
  HOOP_ASSIGN_OR_RETURN(double seconds, get_seconds(name, env));
  // At most kMaxSeconds * 1000: exact in a double and far inside int64.
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1e3)));
}

Result<double> get_number(std::string_view name, const EnvLookup& env) {
  HOOP_ASSIGN_OR_RETURN(Lookup l, resolve(name, kNumber, env));
  return parse_decimal(*find_var(name), l);
}

Result<bool> get_bool(std::string_view name, const EnvLookup& env) {
  HOOP_ASSIGN_OR_RETURN(Lookup l, resolve(name, kBool, env));
  return parse_bool(*find_var(name), l);
}

std::string accepted(const Var& var) {
  switch (var.type) {
    case kString:
      return "any string";
    case kInt:
      return "an integer in " + range_text(var);
    case kBytes:
      return "a byte count (an integer, optionally with a K, M, G or T suffix) in " +
             range_text(var);
    case kSeconds:
      return "a number of seconds in " + range_text(var);
    case kNumber:
      return "a number in " + range_text(var);
    case kBool:
      return "a boolean (1/0, true/false, yes/no, on/off)";
    case kEnum:
      return fmt::format("one of {}", var.choices);
  }
  return "?";
}

Status validate_env(const EnvLookup& env) {
  for (const Var& var : all_vars()) {
    // Both spellings are checked: a malformed alias must not hide behind a valid HOOP_ value.
    if (auto v = env(var.name)) HOOP_RETURN_IF_ERROR(check(var, {std::string(var.name), *v}));
    if (var.horovod_alias.empty()) continue;
    if (auto v = env(var.horovod_alias))
      HOOP_RETURN_IF_ERROR(check(var, {std::string(var.horovod_alias), *v}));
  }
  return Status::success();
}

std::string markdown_table() {
  std::string out =
      "| variable | Horovod alias | accepts | default | meaning |\n|---|---|---|---|---|\n";
  for (const Var& v : all_vars()) {
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", v.name,
                       v.horovod_alias.empty() ? "" : fmt::format("`{}`", v.horovod_alias),
                       type_text(v),
                       v.default_value.empty() ? "" : fmt::format("`{}`", v.default_value), v.doc);
  }
  return out;
}

std::string help_text() {
  std::string out = "Environment variables (HOROVOD_* aliases are accepted too):\n";
  for (const Var& v : all_vars()) {
    out += fmt::format("  {:<22} {}", v.name, v.doc);
    std::vector<std::string> notes;
    if (is_numeric(v.type)) notes.push_back(type_text(v));
    if (!v.default_value.empty()) notes.push_back(fmt::format("default: {}", v.default_value));
    if (!notes.empty()) out += fmt::format(" [{}]", fmt::join(notes, "; "));
    if (!v.horovod_alias.empty()) out += fmt::format(" (alias {})", v.horovod_alias);
    out += '\n';
  }
  return out;
}

}  // namespace hoop::config

namespace hoop {

namespace {

// At the public API a name hoop does not declare is the caller's mistake, not hoop's.
Status not_hoops(std::string_view name) {
  return invalid_argument(fmt::format(
      "{} is not a hoop configuration variable (hooprun --env-table lists them)", name));
}

}  // namespace

Result<std::string> config_value(std::string_view name) {
  const config::Var* var = config::find_var(name);
  if (var == nullptr) return not_hoops(name);
  HOOP_ASSIGN_OR_RETURN(config::Lookup l, config::resolve(name, var->type, config::process_env()));
  if (var->type == config::VarType::kEnum) return config::parse_enum(*var, l);
  HOOP_RETURN_IF_ERROR(config::check(*var, l));
  return l.value;
}

Result<std::string> config_default(std::string_view name) {
  const config::Var* var = config::find_var(name);
  if (var == nullptr) return not_hoops(name);
  if (var->default_value.empty()) return not_found(fmt::format("{} has no default", name));
  return std::string(var->default_value);
}

}  // namespace hoop
