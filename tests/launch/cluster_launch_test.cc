// Jobs started without hooprun's own launcher: by mpirun (directly and through hooprun --mpi)
// and by simulated srun and Kubernetes Indexed Job environments, each rank a real comm_check
// that joins through the store rank 0 hosts and allreduces. Also hooprun --check-build.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <set>

#include "collectives/algorithms/device_path.h"
#include "device/device.h"
#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kCommCheck[] = HOOP_COMM_CHECK_BIN;
// Small and quick: the point is that the job forms, the collectives have their own tests.
constexpr char kCheckArgs[] = " check --algos ring,auto --counts 1,1023";

RunResult run_sh(const std::string& script, const std::vector<std::string>& env = {}) {
  return Hooprun::start_at("/bin/sh", {"-c", script}, env)->wait();
}

// Starts `n` comm_check ranks with the variables `env_of(rank)` gives, as a launcher would,
// each bounded by `timeout`; the script fails when any rank does.
std::string start_ranks(int n, const std::function<std::string(int)>& env_of) {
  std::string script = "pids=''\n";
  for (int r = 0; r < n; ++r) {
    script += fmt::format("env {} timeout 60 {}{} & pids=\"$pids $!\"\n", env_of(r), kCommCheck,
                          kCheckArgs);
  }
  return script + "rc=0\nfor p in $pids; do wait $p || rc=1; done\nexit $rc\n";
}

void expect_job_formed(const RunResult& r, int n) {
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(count_lines_with(r.out, "checked"), n) << r.out << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("FAIL")));
}

TEST(ClusterLaunchTest, MpirunStartsAJobWithoutHooprun) {
  // As the README shows it: the secret passes by name (-x), never on the command line.
  expect_job_formed(run_sh(fmt::format("timeout 60 mpirun --allow-run-as-root --oversubscribe "
                                       "-np 2 -x HOOP_SECRET {}{}",
                                       kCommCheck, kCheckArgs),
                           {"HOOP_SECRET=readme-secret"}),
                    2);
  // Without HOOP_SECRET: a key derived from mpirun's job identity.
  expect_job_formed(run_sh(fmt::format("timeout 60 mpirun --allow-run-as-root --oversubscribe "
                                       "-np 3 {}{}",
                                       kCommCheck, kCheckArgs)),
                    3);
}

TEST(ClusterLaunchTest, HooprunMpiPassesTheSecretByNameOnly) {
  const std::string rank = fmt::format(
      "echo \"secret=$HOOP_SECRET\"; echo \"parent=$(tr '\\0' ' ' < /proc/$PPID/cmdline)\"; "
      "exec {}{}",
      kCommCheck, kCheckArgs);
  const RunResult r = run_hooprun({"--mpi", "--verbose", "-np", "2", "sh", "-c", rank});
  expect_job_formed(r, 2);
  EXPECT_THAT(r.err, HasSubstr("hooprun: running mpirun --allow-run-as-root --tag-output -np 2 "
                               "-H localhost:2 -bind-to none -map-by slot -mca pml ob1 -mca btl "
                               "^openib -x "));
  EXPECT_THAT(r.err, HasSubstr(" -x HOOP_SECRET "));
  std::set<std::string> secrets;
  for (const std::string& line : split_lines(r.out)) {
    if (const std::size_t at = line.find(">:secret="); at != std::string::npos)
      secrets.insert(line.substr(at + 9));
  }
  ASSERT_EQ(secrets.size(), 1u) << r.out;
  const std::string secret = *secrets.begin();
  EXPECT_EQ(secret.size(), 64u);
  EXPECT_THAT(r.err, Not(HasSubstr(secret)));
  EXPECT_EQ(count_lines_with(r.out, "parent=", "mpirun"), 2) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "parent=", secret), 0) << r.out;
}

TEST(ClusterLaunchTest, HooprunMpiNeedsMpirunOnPath) {
  const RunResult r =
      Hooprun::start_at("/usr/bin/env", {"PATH=/nonexistent", HOOP_TEST_BIN_DIR "/hooprun", "--mpi",
                                         "-np", "2", "true"})
          ->wait();
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_THAT(r.err, HasSubstr("--mpi: mpirun is not on PATH"));
}

TEST(ClusterLaunchTest, SlurmStepFormsAJob) {
  // A job id of this test's own, so that concurrent runs get different default ports.
  const int job = ::getpid();
  expect_job_formed(run_sh(start_ranks(3,
                                       [&](int r) {
                                         return fmt::format(
                                             "SLURM_PROCID={0} SLURM_LOCALID={0} SLURM_NTASKS=3 "
                                             "SLURM_NODEID=0 SLURM_NNODES=1 "
                                             "SLURM_TASKS_PER_NODE=3 SLURM_JOB_ID={1} "
                                             "SLURM_STEP_ID=0 "
                                             "SLURM_JOB_NODELIST='localhost,gpu[01-02]'",
                                             r, job);
                                       })),
                    3);
}

TEST(ClusterLaunchTest, KubernetesIndexedJobFormsAJob) {
  // Index 0's name is 127.0.0.10, a loopback address like a headless service's pod name.
  const int job = ::getpid();
  expect_job_formed(
      run_sh(start_ranks(2,
                         [&](int r) {
                           return fmt::format(
                               "JOB_COMPLETION_INDEX={0} HOSTNAME=trainer{1}-{0} HOOP_SIZE=2 "
                               "HOOP_HOST_PATTERN='127.0.0.1{{index}}'",
                               r, job);
                         }),
             {"HOOP_SECRET=from-a-kubernetes-secret"}),
      2);
}

TEST(ClusterLaunchTest, CheckBuildListsWhatThisBuildCanUse) {
  const RunResult r = run_hooprun({"--check-build"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("hoop v"));
  // Transports in the registry's order: the closest first, then tcp, then the forced-only ones.
  for (const char* line :
       {"Available transports:\n    [X] shm  (compiled in, /dev/shm is writable)\n",
        "    [X] tcp  (compiled in)\n", "Available adapters:\n    [X] train  (compiled in)\n",
        "Available launchers:\n    [X] hooprun  (compiled in)\n"})
    EXPECT_THAT(r.out, HasSubstr(line));
  // Every entry says whether it is usable and why, in one format.
  std::set<std::string> names;
  for (const std::string& line : split_lines(r.out)) {
    if (!line.starts_with("    [")) continue;
    ASSERT_TRUE(line.starts_with("    [X] ") || line.starts_with("    [ ] ")) << line;
    const std::size_t gap = line.find("  (", 8);
    ASSERT_NE(gap, std::string::npos) << line;
    EXPECT_TRUE(line.ends_with(")")) << line;
    names.insert(line.substr(8, gap - 8));
  }
  EXPECT_EQ(names, (std::set<std::string>{"tcp", "shm", "ucx", "mpi", "cuda", "train", "torch",
                                          "jax", "tensorflow", "keras", "nccl", "hooprun", "ssh",
                                          "mpirun", "srun", "ray", "spark"}));
  // The cuda line tells a build without CUDA from one without a usable GPU, and names why.
  const char* cuda = !device::cuda_built()         ? "[ ] cuda  (built without CUDA "
                     : device::device_count() == 0 ? "[ ] cuda  (built, but no usable device: "
                                                   : "[X] cuda  (CUDA ";
  EXPECT_THAT(r.out, HasSubstr(cuda));
  // The nccl line says whether libhoop has the NCCL adapter and whether a device lets it run.
  const char* nccl = !collectives::device_backend_registered("nccl")
                         ? "[ ] nccl  (not compiled in: "
                     : device::device_count() == 0 ? "[ ] nccl  (compiled in, NCCL "
                                                   : "[X] nccl  (compiled in, NCCL ";
  EXPECT_THAT(r.out, HasSubstr(nccl));
  const bool have_mpirun = ::access("/usr/bin/mpirun", X_OK) == 0;
  EXPECT_EQ(r.out.find("[X] mpirun  (") != std::string::npos, have_mpirun) << r.out;
  // Text only: MPI's version string once carried its terminating NUL into the mpi line.
  EXPECT_EQ(r.out.find('\0'), std::string::npos);
  for (char c : r.out) EXPECT_TRUE(c == '\n' || (c >= ' ' && c < 127)) << int(c);
}

TEST(ClusterLaunchTest, CheckBuildSaysWhetherTheTorchModuleIsOnPythonpath) {
  // The torch line names the module's folder without claiming PYTHONPATH is set.
  const RunResult unset = run_hooprun({"--check-build"}, {"PYTHONPATH="});
  const RunResult set =
      run_hooprun({"--check-build"}, {std::string("PYTHONPATH=/nowhere:") + HOOP_PYTHON_DIR});
  for (const RunResult* r : {&unset, &set}) {
    ASSERT_EQ(r->exit_code, 0) << r->err;
    EXPECT_THAT(r->out, Not(HasSubstr("(PYTHONPATH=")));
  }
  if (set.out.find("[X] torch") == std::string::npos) GTEST_SKIP() << "torch is not usable here";
  EXPECT_THAT(unset.out,
              HasSubstr(fmt::format("module in {}, not on PYTHONPATH, which the ranks need",
                                    HOOP_PYTHON_DIR)));
  EXPECT_THAT(set.out, HasSubstr(fmt::format("module in {}, on PYTHONPATH;", HOOP_PYTHON_DIR)));
}

}  // namespace
}  // namespace hoop::launch::testing
