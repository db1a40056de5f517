// Runs a program under Open MPI's mpirun from a test, bounded by a deadline, with its output
// captured; the MPI tests skip where mpirun is not installed.
#pragma once

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace hoop::testing {

/// Where mpirun is; empty when it is not on PATH.
inline std::string mpirun_path() {
  FILE* p = ::popen("command -v mpirun 2>/dev/null", "r");
  if (p == nullptr) return "";
  std::array<char, 512> buf{};
  std::string out;
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

struct MpirunResult {
  int exit_code = -1;
  bool timed_out = false;
  std::string out;  // stdout and stderr together
};

/// `mpirun -np n program args...` with `env` (NAME=value) exported to every rank, killed after
/// `deadline` (timed_out then). Shared memory between the ranks is copied through the kernel
/// without ptrace's single-copy mechanism, which containers often forbid.
inline MpirunResult run_mpirun(int n, const std::string& program,
                               const std::vector<std::string>& args,
                               const std::vector<std::string>& env, std::chrono::seconds deadline) {
  std::string cmd = "env -u HOOP_RANK -u HOOP_SIZE -u HOOP_RENDEZVOUS_ADDR -u HOOP_RENDEZVOUS_PORT";
  cmd += " OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1";
  // Open MPI's own allocations at MPI_Init are never freed (see mpi_lsan.supp).
  std::vector<std::string> all_env = env;
  // Open MPI unloads its components at MPI_Finalize; kept loaded, their frames keep names
  // that the suppressions can match. Even so, the frame-pointer unwinder stops in the first
  // frame of code built without frame pointers (a module LSan then cannot name); the slow
  // unwinder reaches the libmpi/libpmix frames below it (about 1 s more per job under the
  // sanitizers, none in the normal build).
  all_env.push_back("OMPI_MCA_mca_base_component_disable_dlclose=1");
  all_env.push_back("LSAN_OPTIONS=suppressions=" HOOP_SOURCE_DIR
                    "/tests/transports/mpi_lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0");
  for (const std::string& e : all_env) cmd += " '" + e + "'";
  cmd += " timeout -k 5 " + std::to_string(deadline.count()) + " " + mpirun_path() +
         " --allow-run-as-root --oversubscribe --bind-to none -np " + std::to_string(n);
  for (const std::string& e : all_env) cmd += " -x " + e.substr(0, e.find('='));
  cmd += " '" + program + "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  MpirunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) r.out += buf.data();
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.timed_out = r.exit_code == 124 || r.exit_code == 137;
  return r;
}

/// Lines of `text` holding `needle`.
inline int count_lines_holding(const std::string& text, const std::string& needle) {
  int n = 0;
  std::size_t at = 0;
  while ((at = text.find(needle, at)) != std::string::npos) {
    ++n;
    at = text.find('\n', at);
    if (at == std::string::npos) break;
  }
  return n;
}

}  // namespace hoop::testing
