// Ranks on another host over ssh, against a real sshd on loopback: the test starts Debian's
// /usr/sbin/sshd on a free port of 127.0.0.2 (an address hooprun does not take for this
// machine) with its own host key, config and authorized key, and kills it at the end.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "tests/core/closed_port.h"
#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kHost = "127.0.0.2";

// A port of kHost that nothing listens on right now.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, kHost, &addr.sin_addr);
  socklen_t length = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool accepts_connections(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, kHost, &addr.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// An sshd of the test's own, or the reason there is none.
class Sshd {
 public:
  Sshd() {
    if (::geteuid() != 0) {
      skip_ = "sshd's root login needs the tests to run as root";
      return;
    }
    for (const char* program : {"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"}) {
      if (::access(program, X_OK) != 0) {
        skip_ = std::string(program) + " is missing (Debian: openssh-server, openssh-client)";
        return;
      }
    }
    // sshd's privilege separation directory.
    ::mkdir("/run/sshd", 0755);
    const std::string keygen = "/usr/bin/ssh-keygen -q -t ed25519 -N '' -f ";
    if (std::system((keygen + "'" + dir_.file("host_key") + "'").c_str()) != 0 ||
        std::system((keygen + "'" + key() + "'").c_str()) != 0) {
      skip_ = "ssh-keygen failed";
      return;
    }
    const std::optional<std::string> public_key = read_file(key() + ".pub");
    write_file(dir_.file("authorized_keys"), public_key.value_or(""), 0600);
    // sshd binds a port found free a moment before; another process may take it meanwhile,
    // and sshd then exits: a few tries on fresh ports.
    for (int attempt = 0; attempt < 3; ++attempt)
      if (start(free_port())) return;
  }

  ~Sshd() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  const std::string& skip() const { return skip_; }
  const std::string& failure() const { return failure_; }
  int port() const { return port_; }
  std::string key() const { return dir_.file("user_key"); }

 private:
  /// Starts sshd on `port`; false (with failure_ saying why) if it does not come up.
  bool start(int port) {
    port_ = port;
    write_file(dir_.file("sshd_config"),
               "Port " + std::to_string(port_) + "\nListenAddress " + kHost + "\nHostKey " +
                   dir_.file("host_key") + "\nAuthorizedKeysFile " + dir_.file("authorized_keys") +
                   "\nPermitRootLogin yes\nPasswordAuthentication no\nUsePAM no\nStrictModes no"
                   "\nPidFile " +
                   dir_.file("sshd.pid") + "\n");
    const std::string log = dir_.file("sshd.log");
    const std::string config = dir_.file("sshd_config");
    pid_ = ::fork();
    if (pid_ == 0) {
      // Even a test that crashes takes its sshd along.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::freopen(log.c_str(), "w", stderr);
      ::execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-e", "-f", config.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 400 && !accepts_connections(port_); ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pid_ > 0 && accepts_connections(port_)) return true;
    failure_ = "sshd did not start: " + read_file(log).value_or("");
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    return false;
  }

  TempDir dir_;
  std::string skip_;
  std::string failure_;
  int port_ = -1;
  pid_t pid_ = -1;
};

class HooprunSshTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sshd_ = new Sshd(); }
  static void TearDownTestSuite() {
    delete sshd_;
    sshd_ = nullptr;
  }

  void SetUp() override {
    if (!sshd_->skip().empty()) GTEST_SKIP() << sshd_->skip();
    ASSERT_THAT(sshd_->failure(), IsEmpty());
  }

  /// hooprun's options for `ranks` ranks on kHost over the test's sshd, then `rest`.
  static std::vector<std::string> job(int ranks, const std::vector<std::string>& rest,
                                      int port = sshd_->port()) {
    std::vector<std::string> args{
        "-np", std::to_string(ranks), "-H", std::string(kHost) + ":" + std::to_string(ranks),
        "-p",  std::to_string(port),  "-i", sshd_->key()};
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
  }

  static Sshd* sshd_;
};

Sshd* HooprunSshTest::sshd_ = nullptr;

// Every process's command line, NUL-separated words joined.
std::vector<std::string> all_command_lines() {
  std::vector<std::string> lines;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::optional<std::string> line = read_file(entry.path().string() + "/cmdline")) {
      lines.push_back(*line);
    }
  }
  return lines;
}

TEST_F(HooprunSshTest, RanksRunAnAllreduceOverSshAndTheSecretIsOnNoCommandLine) {
  TempDir dir;
  const std::string script =
      "echo \"arg=[$0] cwd=$(pwd) fwd=$SSH_TEST_VAR layout=$HOOP_RANK/$HOOP_SIZE\"; "
      "printf %s \"$HOOP_SECRET\" > '" +
      dir.path() + "/secret.'$HOOP_RANK; " + sh_write_pid(dir) + sh_wait_for_go(dir) +
      "exec " HOOP_COMM_CHECK_BIN " check --algos ring --counts 7";
  const std::string arg = "it's a \"quoted\" $arg";
  std::unique_ptr<Hooprun> hooprun = Hooprun::start(
      job(2, {"-x", "SSH_TEST_VAR", "/bin/sh", "-c", script, arg}), {"SSH_TEST_VAR=a b"});
  ASSERT_TRUE(hooprun);
  const std::vector<pid_t> pids = wait_for_rank_pids(dir, 2);
  const std::optional<std::string> secret = read_file(dir.file("secret.0"));
  ASSERT_TRUE(secret);
  EXPECT_EQ(secret->size(), 64u);
  EXPECT_EQ(read_file(dir.file("secret.1")), secret);
  for (const std::string& line : all_command_lines()) {
    EXPECT_EQ(line.find(*secret), std::string::npos) << "the job secret is on a command line";
  }
  write_file(dir.file("go"), "");

  const RunResult r = hooprun->wait();
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string cwd = std::filesystem::current_path().string();
  for (int rank = 0; rank < 2; ++rank) {
    const std::string line = "[" + std::to_string(rank) + "] arg=[" + arg + "] cwd=" + cwd +
                             " fwd=a b layout=" + std::to_string(rank) + "/2";
    EXPECT_EQ(count_lines_with(r.out, line), 1) << r.out << r.err;
    EXPECT_TRUE(wait_until_gone(pids[rank]));
  }
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), 2) << r.out << r.err;
}

TEST_F(HooprunSshTest, ARemoteFailureIsReportedWithTheEndOfItsStderrAndEndsTheOtherRank) {
  TempDir dir;
  const std::string script =
      sh_write_pid(dir) + "if [ $HOOP_RANK = 1 ]; then " + sh_wait_for_go(dir) +
      "i=1; while [ $i -le 12 ]; do echo \"err line $i\" >&2; i=$((i+1)); done; exit 3; fi; "
      "exec sleep 60";
  std::unique_ptr<Hooprun> hooprun = Hooprun::start(job(2, {"/bin/sh", "-c", script}));
  ASSERT_TRUE(hooprun);
  const std::vector<pid_t> pids = wait_for_rank_pids(dir, 2);
  write_file(dir.file("go"), "");
  const RunResult r = hooprun->wait();
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("hooprun: job failed: rank 1 on host 127.0.0.2 (pid "));
  std::string tail = "exited with code 3; the last 10 lines of its stderr:\n";
  for (int i = 3; i <= 12; ++i) tail += "  [1] err line " + std::to_string(i) + "\n";
  EXPECT_THAT(r.err, EndsWith(tail));
  // Rank 0 ran on under the remote sshd; its ssh connection's end must have ended it.
  EXPECT_TRUE(wait_until_gone(pids[0])) << "the remote rank 0 outlived the job";
}

TEST_F(HooprunSshTest, AnUnreachableHostFailsThePreflightBeforeAnyRankStarts) {
  TempDir dir;
  // Held for the test's length: a port only found free could be taken meanwhile.
  const hoop::testing::ClosedPort closed = hoop::testing::closed_port(kHost);
  const int port = closed.port;
  const RunResult r =
      run_hooprun(job(2, {"/bin/sh", "-c", "touch '" + dir.path() + "/started'"}, port));
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("hooprun: preflight: host '127.0.0.2' is not reachable over ssh "
                               "(port " +
                               std::to_string(port) + ")"));
  EXPECT_THAT(r.err, HasSubstr("Connection refused"));
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(std::filesystem::exists(dir.file("started")));
}

}  // namespace
}  // namespace hoop::launch::testing
