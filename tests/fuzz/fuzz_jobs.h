// Jobs of collective_fuzz ranks for the GoogleTest cases: launched by hooprun, or by mpirun
// for the MPI transport, and judged by the ranks' exit codes and rank 0's summary line.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "tests/launch/hooprun_harness.h"
#include "tests/transports/mpirun_harness.h"

namespace hoop::fuzz::testing {

/// One job: its ranks, the hosts they simulate (0: none), and the transport's environment.
struct FuzzJob {
  const char* name;
  int ranks;
  int hosts;
  std::vector<std::string> env;  // HOOP_TRANSPORT=... and the like
  bool mpirun = false;
};

inline void PrintTo(const FuzzJob& job, std::ostream* os) { *os << job.name; }

/// The job's ranks run collective_fuzz with `args`; expects every case to pass on every rank.
inline void expect_job_passes(const FuzzJob& job, const std::vector<std::string>& args,
                              std::chrono::seconds deadline) {
  std::vector<std::string> all_args;
  if (job.hosts > 0) all_args = {"--hosts", std::to_string(job.hosts)};
  all_args.insert(all_args.end(), args.begin(), args.end());
  bool timed_out = false;
  int exit_code = -1;
  std::string out;
  if (job.mpirun) {
    if (hoop::testing::mpirun_path().empty()) GTEST_SKIP() << "mpirun is not installed";
    const hoop::testing::MpirunResult r =
        hoop::testing::run_mpirun(job.ranks, HOOP_COLLECTIVE_FUZZ_BIN, all_args, job.env, deadline);
    timed_out = r.timed_out;
    exit_code = r.exit_code;
    out = r.out;
  } else {
    const launch::testing::RunResult r = launch::testing::run_ranks(
        HOOP_COLLECTIVE_FUZZ_BIN, job.ranks, all_args, job.env, deadline);
    timed_out = r.timed_out;
    exit_code = r.exit_code;
    out = r.out + r.err;
  }
  // The seed, the counts of cases and any failure with its replay command.
  ASSERT_FALSE(timed_out) << out;
  EXPECT_EQ(exit_code, 0) << out;
  EXPECT_EQ(
      launch::testing::count_lines_with(out, "collective_fuzz: seed", "0 failures on any rank"), 1)
      << out;
  std::cout << out;
}

}  // namespace hoop::fuzz::testing
