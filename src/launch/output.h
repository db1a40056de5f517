// Rank output as the user sees it: whole lines with a "[rank] " prefix, written so that one
// line never mixes with another.
#pragma once

#include <cstddef>
#include <deque>
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

/// The last lines of a stream, for the report on a failed rank. Pure: it neither reads nor
/// writes.
class TailLines {
 public:
  /// A line longer than this keeps only its first bytes.
  static constexpr std::size_t kMaxLineBytes = 1024;

  explicit TailLines(std::size_t max_lines) : max_lines_(max_lines) {}
  /// Takes the next bytes of the stream.
  void feed(std::string_view data);
  /// The last `max_lines` lines, oldest first, an unfinished last line included.
  std::vector<std::string> lines() const;

 private:
  std::size_t max_lines_;
  std::deque<std::string> lines_;
  std::string pending_;
  bool pending_cut_ = false;  // pending_ reached kMaxLineBytes; the rest of the line is dropped
};

/// Writes all of `data` to `fd`, retrying short writes, EINTR and EAGAIN (waiting until the
/// descriptor is writable). The error of the first write that fails otherwise.
Status write_all(int fd, std::string_view data);

/// hooprun's own message on stderr: "hooprun: <message>" and a newline, in one write.
void say(std::string_view message);

/// `args` as one shell-quoted line, for messages that show a command.
std::string format_command(const std::vector<std::string>& args);

}  // namespace hoop::launch
