#include "core/log.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <string>

#include "core/config.h"

namespace hoop::log {
namespace {

std::atomic<Level> g_level{Level::kWarn};
std::atomic<int> g_rank{-1};

char level_letter(Level level) {
  switch (level) {
    case Level::kTrace:
      return 'T';
    case Level::kDebug:
      return 'D';
    case Level::kInfo:
      return 'I';
    case Level::kWarn:
      return 'W';
    case Level::kError:
      return 'E';
    case Level::kOff:
      return '-';
  }
  return '?';
}

}  // namespace

Level level() { return g_level.load(std::memory_order_relaxed); }
void set_level(Level lvl) { g_level.store(lvl, std::memory_order_relaxed); }
void set_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

bool enabled(Level lvl) { return lvl != Level::kOff && lvl >= level(); }

std::optional<Level> parse_level(std::string_view name) {
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (key == "trace") return Level::kTrace;
  if (key == "debug") return Level::kDebug;
  if (key == "info") return Level::kInfo;
  if (key == "warn" || key == "warning") return Level::kWarn;
  if (key == "error") return Level::kError;
  if (key == "off") return Level::kOff;
  return std::nullopt;
}

Status init_from_env() {
  HOOP_ASSIGN_OR_RETURN(std::string name, config::get_string("HOOP_LOG_LEVEL"));
  // The registry already restricted the value to the known names.
  set_level(parse_level(name).value_or(Level::kWarn));
  return Status::success();
}

void write(Level lvl, std::string_view message) {
  const int rank = g_rank.load(std::memory_order_relaxed);
  std::string line = rank >= 0 ? fmt::format("[hoop {}] {} ", rank, level_letter(lvl))
                               : fmt::format("[hoop pid {}] {} ", ::getpid(), level_letter(lvl));
  line.append(message);
  line.push_back('\n');
  // One write() per line keeps lines from different threads and ranks whole.
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // stderr is gone; logging must never fail the caller
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace hoop::log
