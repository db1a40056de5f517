// libucs's fatal-signal handlers (transports/ucx/ucx_signals.h): a crash in a program that links
// hoop but does not use UCX is the program's own, not "Caught signal 11" and a backtrace from
// libucs; UCX_HANDLE_ERRORS keeps UCX's report, and a UCX transport puts it back. The crashes
// run in fresh copies of this binary (the handlers are decided when libhoop loads).
#include "transports/ucx/ucx_signals.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "transports/ucx/ucx_transport.h"

namespace hoop::testing {
namespace {

struct Crash {
  int signal = 0;  // that ended the child, 0 if none did
  std::string err;
};

/// Runs this binary's UcxSignals.CrashHere in a child with `env` added ("NAME=VALUE" each).
Crash crash_in_child(const std::vector<std::string>& env) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    ::setenv("HOOP_TEST_CRASH", "1", 1);
    ::unsetenv("UCX_HANDLE_ERRORS");
    ::unsetenv("HOOP_TRANSPORT");
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    ::alarm(60);  // kept across exec: a child that fails to crash ends anyway (SIGALRM)
    ::execl("/proc/self/exe", "ucx_signals_child", "--gtest_filter=UcxSignals.CrashHere",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  Crash c;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) c.err.append(buf, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) c.signal = WTERMSIG(status);
  return c;
}

// The child's body: a null write, only when a test above launched it.
TEST(UcxSignals, CrashHere) {
  if (std::getenv("HOOP_TEST_CRASH") == nullptr) GTEST_SKIP() << "the crashing child's body";
  volatile int* p = nullptr;
  *p = 1;
}

TEST(UcxSignals, ACrashOfAProgramNotUsingUcxIsNotReportedByUcx) {
  const Crash c = crash_in_child({});
  EXPECT_EQ(c.signal, SIGSEGV) << c.err;
  EXPECT_EQ(c.err.find("Caught signal"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find("libucs"), std::string::npos) << c.err;
}

TEST(UcxSignals, UcxHandleErrorsKeepsUcxsReport) {
  const Crash c = crash_in_child({"UCX_HANDLE_ERRORS=bt"});
  EXPECT_NE(c.err.find("Caught signal"), std::string::npos) << c.err;
}

TEST(UcxSignals, HoopTransportUcxKeepsUcxsReport) {
  const Crash c = crash_in_child({"HOOP_TRANSPORT=ucx"});
  EXPECT_NE(c.err.find("Caught signal"), std::string::npos) << c.err;
}

TEST(UcxSignals, AUcxTransportPutsTheHandlersBackAndAProbeDoesNot) {
  if (std::getenv("UCX_HANDLE_ERRORS") != nullptr || std::getenv("HOOP_TRANSPORT") != nullptr)
    GTEST_SKIP() << "UCX's handlers were never taken off in this environment";
  ASSERT_GT(ucx::error_handlers_taken(), 0);
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &before), 0);
  EXPECT_EQ(before.sa_handler, SIG_DFL);
  std::string why;
  ASSERT_TRUE(ucx::ucx_usable(&why)) << why;  // opens a context and a worker, as a probe
  struct sigaction probed {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &probed), 0);
  EXPECT_EQ(probed.sa_handler, SIG_DFL);
  ucx::restore_error_handlers();  // what ucx::connect does first
  struct sigaction after {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &after), 0);
  EXPECT_NE(after.sa_handler, SIG_DFL);
}

}  // namespace
}  // namespace hoop::testing
