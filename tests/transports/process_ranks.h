// Ranks as forked processes for the transport fault tests: each child reports one line on a
// pipe ("R" when ready, "E <code> <message>" with the error it got), and the parent kills,
// stops or waits for them. The store runs in a child process too, so that the test process
// stays single-threaded and can fork safely (tcp_test_util.h).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hoop/transport.h"
#include "tests/transports/tcp_test_util.h"

namespace hoop::testing {

/// One forked rank and the read end of the pipe it reports on.
struct Child {
  pid_t pid = -1;
  int out = -1;
};

/// Writes `line` to the parent and ends the child.
[[noreturn]] inline void report(int out, const std::string& line) {
  const std::string l = line + "\n";
  (void)!::write(out, l.data(), l.size());
  ::_exit(0);
}

/// Reports "E <code> <message>" and ends the child.
[[noreturn]] inline void report_status(int out, const Status& s) {
  report(out, fmt::format("E {} {}", static_cast<int>(s.code()), s.message()));
}

/// Tells the parent the child is ready ("R"), and goes on.
inline void say_ready(int out) { (void)!::write(out, "R\n", 2); }

/// One line from `c`, or "" when none came before `deadline` (or the pipe closed).
inline std::string read_line(const Child& c, Deadline deadline) {
  std::string line;
  char ch;
  while (Clock::now() < deadline) {
    pollfd p{c.out, POLLIN, 0};
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left, 0))) <= 0) continue;
    if (::read(c.out, &ch, 1) != 1) break;
    if (ch == '\n') return line;
    line.push_back(ch);
  }
  return line;
}

/// The status code of an "E <code> ..." line.
inline int reported_code(const std::string& line) {
  return line.size() > 2 ? std::atoi(line.c_str() + 2) : -1;
}

/// A store process, forked ranks, and their clean-up (SIGKILL, after SIGCONT for a stopped
/// one).
class ProcessRanks {
 public:
  ~ProcessRanks() {
    for (Child& c : children_) {
      ::kill(c.pid, SIGKILL);
      ::kill(c.pid, SIGCONT);  // a stopped child dies of the SIGKILL once it runs again
      ::waitpid(c.pid, nullptr, 0);
      ::close(c.out);
    }
    if (store_pid_ > 0) {
      ::kill(store_pid_, SIGKILL);
      ::waitpid(store_pid_, nullptr, 0);
    }
  }

  /// Starts the store; its port, or 0 on failure.
  std::uint16_t start_store() {
    store_port_ = start_store_process(store_pid_);
    return store_pid_ > 0 ? store_port_ : 0;
  }
  std::uint16_t store_port() const { return store_port_; }

  /// Forks `size` ranks, each running `body(rank, out)`.
  void start(int size, const std::function<void(int rank, int out)>& body) {
    for (int r = 0; r < size; ++r) {
      int fds[2];
      ASSERT_EQ(::pipe(fds), 0);
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::close(fds[0]);
        body(r, fds[1]);
        ::_exit(0);
      }
      ::close(fds[1]);
      children_.push_back({pid, fds[0]});
    }
  }

  /// Waits for "R" from every rank; false (and a failure) otherwise.
  bool all_ready() {
    bool ok = true;
    for (std::size_t r = 0; r < children_.size(); ++r) {
      const std::string line = read_line(children_[r], test_deadline());
      EXPECT_EQ(line, "R") << "rank " << r;
      ok = ok && line == "R";
    }
    return ok;
  }

  const Child& child(int rank) const { return children_[static_cast<std::size_t>(rank)]; }

 private:
  std::uint16_t store_port_ = 0;
  pid_t store_pid_ = -1;
  std::vector<Child> children_;
};

}  // namespace hoop::testing
