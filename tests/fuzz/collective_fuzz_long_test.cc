// The fuzzer's long run: new random seeds (printed; HOOP_FUZZ_SEED fixes one) over every
// transport in this build (tcp, shm, both across simulated hosts with the hierarchical
// allreduce, ucx, mpi), each job for its share of HOOP_FUZZ_MINUTES. Run it with
// `scripts/fuzz MINUTES`, or `HOOP_FUZZ_MINUTES=M ctest --test-dir build -L fuzz_long`;
// without HOOP_FUZZ_MINUTES every job skips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_jobs.h"

namespace hoop::fuzz {
namespace {

using testing::FuzzJob;

const std::vector<FuzzJob>& long_jobs() {
  static const std::vector<FuzzJob> jobs = [] {
    std::vector<FuzzJob> j = {
        {"2Ranks_tcp", 2, 0, {"HOOP_TRANSPORT=tcp"}},
        {"3Ranks_tcp", 3, 0, {"HOOP_TRANSPORT=tcp"}},
        {"5Ranks_tcp", 5, 0, {"HOOP_TRANSPORT=tcp"}},
        {"2Ranks_shm", 2, 0, {"HOOP_TRANSPORT=shm"}},
        {"4Ranks_shm", 4, 0, {"HOOP_TRANSPORT=shm"}},
        {"7Ranks_shm", 7, 0, {"HOOP_TRANSPORT=shm"}},
        // The hierarchical allreduce: shm inside the hosts and tcp across (its two threads),
        // and tcp everywhere (its phases in turn).
        {"4Ranks_2Hosts", 4, 2, {}},
        {"6Ranks_3Hosts", 6, 3, {}},
        {"4Ranks_2Hosts_tcp", 4, 2, {"HOOP_TRANSPORT=tcp"}},
        // Uneven hosts: no hierarchical allreduce, shm and tcp pairs mixed.
        {"5Ranks_2Hosts", 5, 2, {}},
    };
#ifdef HOOP_HAVE_UCX
    j.push_back({"2Ranks_ucx_tcp", 2, 0, {"HOOP_TRANSPORT=ucx", "UCX_TLS=tcp"}});
    j.push_back({"4Ranks_ucx_tcp", 4, 0, {"HOOP_TRANSPORT=ucx", "UCX_TLS=tcp"}});
    j.push_back({"3Ranks_ucx_posix", 3, 0, {"HOOP_TRANSPORT=ucx", "UCX_TLS=posix"}});
#endif
#ifdef HOOP_HAVE_MPI
    j.push_back({"2Ranks_mpi", 2, 0, {"HOOP_TRANSPORT=mpi"}, true});
    j.push_back({"3Ranks_mpi", 3, 0, {"HOOP_TRANSPORT=mpi"}, true});
#endif
    return j;
  }();
  return jobs;
}

class CollectiveFuzzLong : public ::testing::TestWithParam<FuzzJob> {};

TEST_P(CollectiveFuzzLong, RandomCasesPassForTheJobsShareOfTheMinutes) {
  const char* minutes = std::getenv("HOOP_FUZZ_MINUTES");
  if (minutes == nullptr || *minutes == '\0')
    GTEST_SKIP() << "HOOP_FUZZ_MINUTES is not set: scripts/fuzz MINUTES runs the long fuzz";
  char* end = nullptr;
  const double total = std::strtod(minutes, &end);
  ASSERT_TRUE(*end == '\0' && total > 0) << "HOOP_FUZZ_MINUTES=" << minutes;
  const double share = total / static_cast<double>(long_jobs().size());
  std::vector<std::string> args = {"--minutes", std::to_string(share)};
  if (const char* seed = std::getenv("HOOP_FUZZ_SEED")) args.insert(args.end(), {"--seed", seed});
  // The share ends the cases; the margin covers the start, the last case and a slow machine.
  const auto deadline = std::chrono::seconds(static_cast<long>(share * 60) + 300);
  testing::expect_job_passes(GetParam(), args, deadline);
}

INSTANTIATE_TEST_SUITE_P(Jobs, CollectiveFuzzLong, ::testing::ValuesIn(long_jobs()),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace hoop::fuzz
