// Levelled, rank-prefixed logging to stderr. HOOP_LOG_LEVEL picks the level (default warn).
// Messages are formatted only when their level is enabled.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string_view>

#include "hoop/core.h"

namespace hoop::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };

/// Current threshold; messages below it are dropped.
Level level();
void set_level(Level level);
/// Parses "trace", "debug", "info", "warn"/"warning", "error", "off" (any case).
std::optional<Level> parse_level(std::string_view name);
/// Reads HOOP_LOG_LEVEL (and its Horovod alias); an unknown level is an error naming it.
Status init_from_env();
/// Rank shown in the prefix; -1 (the default) shows the process id instead.
void set_rank(int rank);
bool enabled(Level level);
/// Writes one line "[hoop <rank>] <L> <message>" atomically to stderr.
void write(Level level, std::string_view message);

}  // namespace hoop::log

/// HOOP_LOG(kWarn, "peer {} lost", rank): formats and writes only when the level is enabled.
#define HOOP_LOG(lvl, ...)                                                     \
  do {                                                                         \
    if (::hoop::log::enabled(::hoop::log::Level::lvl))                         \
      ::hoop::log::write(::hoop::log::Level::lvl, ::fmt::format(__VA_ARGS__)); \
  } while (0)
