// Rank output as the user sees it: whole lines with a "[rank] " prefix, written so that one
// line never mixes with another.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/core.h"

namespace hoop::launch {

/// A line longer than this is passed on in pieces rather than held until its newline.
inline constexpr std::size_t kMaxPendingLineBytes = std::size_t{64} << 10;

/// Cuts one stream of bytes into prefixed lines. Pure: it neither reads nor writes.
class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix, std::size_t max_pending = kMaxPendingLineBytes);

  /// Takes the next bytes of the stream; returns every line they complete, each prefixed,
  /// plus pieces of `max_pending` bytes of an unfinished line that grew that long.
  std::string feed(std::string_view data);
  /// At the end of the stream: the unfinished last line, prefixed and given a newline (so
  /// that the next writer starts on a line of its own); empty when there is none.
  std::string finish();
  /// Bytes held back, waiting for their newline.
  std::size_t pending() const { return pending_.size(); }

 private:
  std::string prefix_;
  std::size_t max_pending_;
  std::string pending_;
};

/// Writes all of `data` to `fd`, retrying short writes, EINTR and EAGAIN (waiting until the
/// descriptor is writable). The error of the first write that fails otherwise.
Status write_all(int fd, std::string_view data);

/// `args` as one shell-quoted line, for messages that show a command.
std::string format_command(const std::vector<std::string>& args);

}  // namespace hoop::launch
