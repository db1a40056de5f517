// The launcher's signals, read from a signalfd: SIGINT, SIGTERM and SIGHUP (to forward to
// the ranks) and SIGCHLD (a rank ended). Handling them is then ordinary code in the event
// loop, never work inside a signal handler.
#pragma once

#include <signal.h>

#include <vector>

#include "core/fd.h"
#include "hoop/core.h"

namespace hoop::launch {

/// The signals hooprun passes on to every rank.
inline constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

class SignalChannel {
 public:
  /// Blocks the forwarded signals, SIGCHLD and SIGPIPE in the calling thread (threads it
  /// starts later inherit the mask, so call this before starting any) and opens a signalfd
  /// for all but SIGPIPE: a write to a closed stdout then fails with EPIPE instead of
  /// killing hooprun. Also makes sure SIGCHLD is not ignored, so that ranks can be waited for.
  static Result<SignalChannel> open();

  SignalChannel(SignalChannel&&) = default;
  SignalChannel& operator=(SignalChannel&&) = default;
  /// Restores the signal mask the thread had before open().
  ~SignalChannel();

  /// The descriptor to poll for readability.
  int fd() const { return fd_.get(); }
  /// The mask the thread had before open(); ranks exec with it.
  const sigset_t& original_mask() const { return original_mask_; }
  /// The signals received since the last call, oldest first (empty when none is pending).
  Result<std::vector<int>> drain();

 private:
  SignalChannel(Fd fd, const sigset_t& original_mask)
      : fd_(std::move(fd)), original_mask_(original_mask) {}

  Fd fd_;
  sigset_t original_mask_{};
};

}  // namespace hoop::launch
