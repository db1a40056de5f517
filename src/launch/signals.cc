#include "launch/signals.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

namespace hoop::launch {

Result<SignalChannel> SignalChannel::open() {
  // An ignored SIGCHLD (inherited from whoever started hooprun) would make the kernel reap
  // the ranks itself, and their exit codes would be lost.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (::sigaction(SIGCHLD, &dfl, nullptr) != 0) return errno_error("sigaction(SIGCHLD)", errno);

  sigset_t wanted;
  sigemptyset(&wanted);
  for (int signo : kForwardedSignals) sigaddset(&wanted, signo);
  sigaddset(&wanted, SIGCHLD);
  sigset_t blocked = wanted;
  sigaddset(&blocked, SIGPIPE);

  sigset_t original;
  if (int error = ::pthread_sigmask(SIG_BLOCK, &blocked, &original); error != 0) {
    return errno_error("pthread_sigmask", error);
  }
  const int fd = ::signalfd(-1, &wanted, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    ::pthread_sigmask(SIG_SETMASK, &original, nullptr);
    return errno_error("signalfd", error);
  }
  return SignalChannel(Fd(fd), original);
}

SignalChannel::~SignalChannel() {
  if (fd_.valid()) ::pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
}

Result<std::vector<int>> SignalChannel::drain() {
  std::vector<int> signals;
  signalfd_siginfo infos[16];
  while (true) {
    const ssize_t n = ::read(fd_.get(), infos, sizeof(infos));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      return errno_error("read(signalfd)", errno);
    }
    const std::size_t count = static_cast<std::size_t>(n) / sizeof(signalfd_siginfo);
    for (std::size_t i = 0; i < count; ++i) signals.push_back(static_cast<int>(infos[i].ssi_signo));
    if (count < std::size(infos)) break;
  }
  return signals;
}

}  // namespace hoop::launch
