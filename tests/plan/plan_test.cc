// hoop-plan's model: its allreduce rows are libhoop's cost model itself, and the other
// strategies follow the formulas plan.h states.
#include "plan.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hoop/communicator.h"

namespace hoop::plan {
namespace {

Workload lenet_like() {
  Workload w;
  w.gradient_bytes = 246824;
  w.compute_s = 17e-3;
  w.update_s = 0.1e-3;
  w.batch = 64;
  return w;
}

Fabric one_gbps() {
  Fabric f;
  f.link = {50e-6, 8e-9, 0.2e-9};
  return f;
}

const Prediction& find(const std::vector<Prediction>& all, const std::string& strategy) {
  for (const Prediction& p : all)
    if (p.strategy == strategy) return p;
  ADD_FAILURE() << "no prediction for " << strategy;
  return all.front();
}

TEST(Plan, AllreduceRowsAreTheLibrarysCostModel) {
  const Workload w = lenet_like();
  const Fabric f = one_gbps();
  for (int n : {2, 3, 25, 1024}) {
    const auto all = predict(w, f, n);
    for (Algorithm a : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner,
                        Algorithm::kTree}) {
      const Prediction& p = find(all, "allreduce " + std::string(algorithm_name(a)));
      EXPECT_DOUBLE_EQ(p.comm_s, predict_allreduce_seconds(a, n, w.gradient_bytes, f.link)) << n;
      EXPECT_DOUBLE_EQ(p.step_s, w.compute_s + w.update_s + p.comm_s);
    }
    // auto is whatever the library would pick.
    const Algorithm chosen = predicted_allreduce_choice(n, w.gradient_bytes, f.link);
    EXPECT_DOUBLE_EQ(find(all, "allreduce auto").comm_s,
                     predict_allreduce_seconds(chosen, n, w.gradient_bytes, f.link));
  }
}

TEST(Plan, GradientsLargerThanTheFusionBufferTravelInSeveralAllreduces) {
  Workload w = lenet_like();
  w.fusion_bytes = 100000;  // 246824 bytes: 100000 + 100000 + 46824
  const Fabric f = one_gbps();
  const double expected = 2 * predict_allreduce_seconds(Algorithm::kRing, 8, 100000, f.link) +
                          predict_allreduce_seconds(Algorithm::kRing, 8, 46824, f.link);
  EXPECT_DOUBLE_EQ(find(predict(w, f, 8), "allreduce ring").comm_s, expected);
}

TEST(Plan, OneWorkerAllreducesNothing) {
  const Workload w = lenet_like();
  const auto all = predict(w, one_gbps(), 1);
  EXPECT_DOUBLE_EQ(find(all, "allreduce auto").step_s, w.compute_s + w.update_s);
  EXPECT_DOUBLE_EQ(find(all, "allreduce auto").efficiency, 1.0);
  EXPECT_DOUBLE_EQ(find(all, "kvstore").comm_s, 0.0);
}

TEST(Plan, TheSynchronousServerCarriesEveryPushAndPull) {
  const Workload w = lenet_like();
  const Fabric f = one_gbps();
  const double g = static_cast<double>(w.gradient_bytes);
  const Prediction& p = find(predict(w, f, 25), "ps");
  EXPECT_DOUBLE_EQ(p.comm_s, 2 * 25 * (50e-6 + g * 8e-9) + 25 * g * 0.2e-9);
  EXPECT_EQ(p.limit, "server link");
}

TEST(Plan, TheAsynchronousServerSaturatesAtItsCeiling) {
  const Workload w = lenet_like();
  const Fabric f = one_gbps();
  const double sat = server_saturation_workers(w, f);
  ASSERT_GT(sat, 1.0);
  const int below = static_cast<int>(std::floor(sat));
  const int beyond = static_cast<int>(std::ceil(4 * sat));
  // Below saturation each worker runs at its own pace; beyond it the server's link sets the pace.
  EXPECT_NEAR(find(predict(w, f, below), "ps-async").efficiency,
              find(predict(w, f, 1), "ps-async").efficiency, 1e-12);
  EXPECT_NEAR(find(predict(w, f, beyond), "ps-async").throughput, server_ceiling(w, f),
              1e-6 * server_ceiling(w, f));
  EXPECT_EQ(find(predict(w, f, beyond), "ps-async").limit, "server link");
}

TEST(Plan, HierarchicalOnlyWhereTheWorkersFillTwoOrMoreHosts) {
  const Workload w = lenet_like();
  Fabric f = one_gbps();
  f.intra = {2e-6, 0.2e-9, 0.2e-9};
  f.ranks_per_host = 4;
  auto has = [&](int n) {
    for (const Prediction& p : predict(w, f, n))
      if (p.strategy == "allreduce hierarchical") return true;
    return false;
  };
  EXPECT_FALSE(has(4));  // one host
  EXPECT_FALSE(has(6));  // not a whole number of hosts
  EXPECT_TRUE(has(8));
  EXPECT_DOUBLE_EQ(find(predict(w, f, 8), "allreduce hierarchical").comm_s,
                   predict_hierarchical_allreduce_seconds(2, 4, w.gradient_bytes, f.intra, f.link));
}

TEST(CostModel, HierarchicalWithOneRankPerHostIsTheFlatChoice) {
  const CostModel m{50e-6, 8e-9, 0.2e-9};
  for (int hosts : {2, 5, 16}) {
    const Algorithm a = predicted_allreduce_choice(hosts, 1 << 20, m);
    EXPECT_DOUBLE_EQ(predict_hierarchical_allreduce_seconds(hosts, 1, 1 << 20, m, m),
                     predict_allreduce_seconds(a, hosts, 1 << 20, m))
        << hosts;
  }
}

TEST(CostModel, HierarchicalSendsLessOverTheLinksThanTheFlatRing) {
  // Four ranks per host over a slow link, fast memory inside: the hierarchical allreduce puts
  // 2(H-1)/H of the buffer on each link, against the flat ring's 2(n-1)/n per rank.
  const CostModel link{50e-6, 8e-9, 0.2e-9};
  const CostModel shm{2e-6, 0.1e-9, 0.2e-9};
  const std::size_t bytes = 64 << 20;
  EXPECT_LT(predict_hierarchical_allreduce_seconds(4, 4, bytes, shm, link),
            predict_allreduce_seconds(Algorithm::kRing, 16, bytes, link));
}

}  // namespace
}  // namespace hoop::plan
