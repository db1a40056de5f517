#include "launch/output.h"

#include <fmt/format.h>

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace hoop::launch {

LinePrefixer::LinePrefixer(std::string prefix, std::size_t max_pending)
    : prefix_(std::move(prefix)), max_pending_(std::max<std::size_t>(max_pending, 1)) {}

std::string LinePrefixer::feed(std::string_view data) {
  std::string out;
  std::size_t newline;
  while ((newline = data.find('\n')) != std::string_view::npos) {
    out += prefix_;
    out += pending_;
    out.append(data.substr(0, newline + 1));
    pending_.clear();
    data.remove_prefix(newline + 1);
  }
  pending_.append(data);
  std::size_t cut = 0;
  while (pending_.size() - cut >= max_pending_) {
    out += prefix_;
    out.append(pending_, cut, max_pending_);
    out += '\n';
    cut += max_pending_;
  }
  pending_.erase(0, cut);
  return out;
}

std::string LinePrefixer::finish() {
  if (pending_.empty()) return {};
  std::string out = prefix_ + pending_ + '\n';
  pending_.clear();
  return out;
}

void TailLines::feed(std::string_view data) {
  while (!data.empty()) {
    const std::size_t newline = data.find('\n');
    const std::string_view piece = data.substr(0, newline);
    if (!pending_cut_) {
      pending_.append(piece.substr(0, kMaxLineBytes - pending_.size()));
      pending_cut_ = pending_.size() == kMaxLineBytes;
    }
    if (newline == std::string_view::npos) return;
    lines_.push_back(std::move(pending_));
    pending_.clear();
    pending_cut_ = false;
    if (lines_.size() > max_lines_) lines_.pop_front();
    data.remove_prefix(newline + 1);
  }
}

std::vector<std::string> TailLines::lines() const {
  std::vector<std::string> out(lines_.begin(), lines_.end());
  if (!pending_.empty()) out.push_back(pending_);
  if (out.size() > max_lines_) out.erase(out.begin());
  return out;
}

Status write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      // Someone else made the shared descriptor non-blocking; wait rather than spin.
      pollfd pfd{fd, POLLOUT, 0};
      if (::poll(&pfd, 1, -1) < 0 && errno != EINTR) return errno_error("poll", errno);
      continue;
    }
    return errno_error("write", errno);
  }
  return Status::success();
}

void say(std::string_view message) {
  (void)write_all(STDERR_FILENO, fmt::format("hooprun: {}\n", message));
}

std::string format_command(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& arg : args) {
    if (!out.empty()) out += ' ';
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789_-+=/.,:@%") == std::string::npos;
    if (plain) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

}  // namespace hoop::launch
