// A move-only owner of a file descriptor, so that every early return closes what it opened.
#pragma once

#include <unistd.h>

#include <utility>

namespace hoop {

class Fd {
 public:
  Fd() = default;
  /// Takes ownership of `fd` (-1: none).
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  /// Takes over `other`'s descriptor, leaving it empty.
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  /// Closes the held descriptor and takes over `other`'s.
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~Fd() { reset(); }

  /// The descriptor, or -1 when none is held.
  int get() const { return fd_; }
  /// True when a descriptor is held.
  bool valid() const { return fd_ >= 0; }
  /// Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }
  /// Closes the held descriptor (if any) and takes `fd`. close() errors are not reported: the
  /// descriptor is gone either way, and unsent socket data was already the peer's problem.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace hoop
