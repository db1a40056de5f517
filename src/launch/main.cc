// hooprun: launches the ranks of a hoop job on this host. See options.cc for the command line
// and job.h for how the ranks are supervised.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/crypto.h"
#include "core/log.h"
#include "hoop/rendezvous.h"
#include "launch/exit_codes.h"
#include "launch/job.h"
#include "launch/options.h"
#include "launch/output.h"
#include "launch/process.h"
#include "launch/signals.h"

namespace hoop::launch {
namespace {

constexpr std::size_t kSecretBytes = 32;
constexpr std::size_t kJobIdBytes = 8;
// PATH as execvp assumes it when the variable is unset.
constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

void say(std::string_view message) {
  (void)write_all(STDERR_FILENO, fmt::format("hooprun: {}\n", message));
}

// A closed stdin, stdout or stderr would be reused by the first pipe hooprun opens, and the
// ranks' output would end up somewhere odd; point them at /dev/null instead.
void ensure_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

// --start-timeout, else HOOP_START_TIMEOUT (already validated), else the registry's default.
Result<double> start_timeout(const LaunchOptions& options) {
  double seconds = 0;
  std::string_view source = "--start-timeout ";
  if (options.start_timeout_s) {
    seconds = *options.start_timeout_s;
  } else {
    HOOP_ASSIGN_OR_RETURN(seconds, config::get_seconds("HOOP_START_TIMEOUT"));
    source = "HOOP_START_TIMEOUT=";
  }
  if (!(seconds > 0 && seconds <= kMaxStartTimeoutS)) {
    return invalid_argument(fmt::format("{}{} is out of range: expected seconds in (0, {}]", source,
                                        seconds, kMaxStartTimeoutS));
  }
  return seconds;
}

int launch(const LaunchOptions& options) {
  if (Status s = config::validate_env(); !s.ok()) {
    say(s.message());
    return kExitUsage;
  }
  if (Status s = log::init_from_env(); !s.ok()) {
    say(s.message());
    return kExitUsage;
  }
  if (options.verbose && !log::enabled(log::Level::kInfo)) log::set_level(log::Level::kInfo);
  Result<double> timeout_s = start_timeout(options);
  if (!timeout_s.ok()) {
    say(timeout_s.status().message());
    return kExitUsage;
  }

  // Checked before anything starts, so that a typo costs no half-started job.
  const char* path_env = std::getenv("PATH");
  Result<std::string> program =
      find_executable(options.command.front(), path_env ? path_env : kDefaultPath);
  if (!program.ok()) {
    say(program.status().message());
    return program.status().code() == StatusCode::kNotFound ? kExitNotFound : kExitCannotExecute;
  }

  // Before the store's thread starts, so that it inherits the blocked signals.
  Result<SignalChannel> signals = SignalChannel::open();
  if (!signals.ok()) {
    say(signals.status().message());
    return kExitFailure;
  }

  Result<std::string> secret = crypto::random_hex(kSecretBytes);
  Result<std::string> job_id = crypto::random_hex(kJobIdBytes);
  if (!secret.ok() || !job_id.ok()) {
    say(fmt::format("cannot generate the job secret: {}",
                    (secret.ok() ? job_id.status() : secret.status()).message()));
    return kExitFailure;
  }

  JobSpec spec;
  spec.program_path = std::move(*program);
  spec.command = options.command;
  spec.env.size = options.num_ranks;
  spec.env.rendezvous_addr = "127.0.0.1";
  spec.env.secret = std::move(*secret);
  spec.env.job_id = std::move(*job_id);
  spec.env.start_timeout_s = *timeout_s;
  spec.inherited_env = current_environment();
  spec.verbose = options.verbose;

  const auto store_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(*timeout_s * 1000.0));
  Result<std::unique_ptr<StoreServer>> store = StoreServer::start(
      spec.env.rendezvous_addr, 0, StoreOptions{spec.env.secret, spec.env.job_id, store_timeout});
  if (!store.ok()) {
    say(fmt::format("cannot start the rendezvous store: {}", store.status().message()));
    return kExitFailure;
  }
  spec.env.rendezvous_port = (*store)->port();
  if (options.verbose) {
    say(fmt::format("job {}: {} rank{}, rendezvous store on {}:{}", spec.env.job_id,
                    options.num_ranks, options.num_ranks == 1 ? "" : "s", spec.env.rendezvous_addr,
                    spec.env.rendezvous_port));
  }

  const int code = run_job(spec, *signals);
  (*store)->stop();
  if (options.verbose) say(fmt::format("exiting with code {}", code));
  return code;
}

}  // namespace
}  // namespace hoop::launch

int main(int argc, char** argv) {
  using namespace hoop::launch;
  ensure_standard_fds();
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  ParsedCommandLine parsed = parse_command_line(args);
  if (!parsed.options) {
    (void)write_all(parsed.exit_code == kExitSuccess ? STDOUT_FILENO : STDERR_FILENO,
                    parsed.message);
    return parsed.exit_code;
  }
  return launch(*parsed.options);
}
