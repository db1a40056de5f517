#include "transports/ucx/ucx_signals.h"

#include <dlfcn.h>

#include <array>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace hoop::ucx {
namespace {

constexpr std::array<int, 4> kFatal = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};

struct Taken {
  std::mutex mu;
  std::array<struct sigaction, kFatal.size()> action{};
  std::array<bool, kFatal.size()> taken{};
  int count = 0;
};

Taken& taken() {
  static Taken t;
  return t;
}

/// Whether `action`'s handler is code of libucs.
bool in_libucs(const struct sigaction& action) {
  void* fn = (action.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<void*>(action.sa_sigaction)
                                                 : reinterpret_cast<void*>(action.sa_handler);
  if (fn == reinterpret_cast<void*>(SIG_DFL) || fn == reinterpret_cast<void*>(SIG_IGN))
    return false;
  Dl_info info{};
  return dladdr(fn, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "libucs") != nullptr;
}

bool user_wants_ucx_handlers() {
  if (std::getenv("UCX_HANDLE_ERRORS") != nullptr) return true;
  const char* transport = std::getenv("HOOP_TRANSPORT");
  return transport != nullptr && std::strcmp(transport, "ucx") == 0;
}

// libucs's constructor runs before this library's (libhoop depends on it), so its handlers are
// in place by now.
[[maybe_unused]] const bool kTakenAtLoad = [] {
  if (user_wants_ucx_handlers()) return false;
  Taken& t = taken();
  std::lock_guard<std::mutex> lock(t.mu);
  for (std::size_t i = 0; i < kFatal.size(); ++i) {
    struct sigaction current {};
    if (sigaction(kFatal[i], nullptr, &current) != 0 || !in_libucs(current)) continue;
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    if (sigaction(kFatal[i], &fallback, nullptr) != 0) continue;
    t.action[i] = current;
    t.taken[i] = true;
    ++t.count;
  }
  return true;
}();

}  // namespace

void restore_error_handlers() {
  Taken& t = taken();
  std::lock_guard<std::mutex> lock(t.mu);
  for (std::size_t i = 0; i < kFatal.size(); ++i) {
    if (!t.taken[i]) continue;
    t.taken[i] = false;
    struct sigaction current {};
    if (sigaction(kFatal[i], nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    sigaction(kFatal[i], &t.action[i], nullptr);
  }
}

int error_handlers_taken() {
  Taken& t = taken();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.count;
}

}  // namespace hoop::ucx
