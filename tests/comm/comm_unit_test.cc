// The cost model, algorithm names and argument validation, without other processes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "collectives/algorithms/allreduce_table.h"
#include "collectives/algorithms/cost_model.h"
#include "collectives/algorithms/validate.h"
#include "core/config.h"
#include "hoop/communicator.h"

namespace hoop {
namespace {

using collectives::choose_allreduce;
using collectives::CostParams;
using collectives::predict_allreduce_seconds;

TEST(CostModel, SwitchesFromRecursiveDoublingToRingAsTheBufferGrows) {
  const CostParams p;
  for (int n : {2, 3, 4, 5, 8, 16}) {
    EXPECT_EQ(choose_allreduce(n, 8, p), Algorithm::kRecursiveDoubling) << n;
    EXPECT_EQ(choose_allreduce(n, std::size_t{256} << 20, p), Algorithm::kRing) << n;
  }
}

TEST(CostModel, TwoRanksExchangeTheWholeBufferUpToOneMebibyte) {
  const CostParams p;
  EXPECT_EQ(choose_allreduce(2, collectives::kTwoRankExchangeBytes, p),
            Algorithm::kRecursiveDoubling);
  EXPECT_EQ(choose_allreduce(2, collectives::kTwoRankExchangeBytes + 4, p), Algorithm::kRing);
}

TEST(CostModel, CrowdedJobsTakeTheTreeForLargeBuffersFromThreeRanks) {
  CostParams p;
  p.crowded = true;
  for (int n : {3, 4, 8}) {
    EXPECT_EQ(choose_allreduce(n, 8, p), Algorithm::kRecursiveDoubling) << n;
    EXPECT_NE(choose_allreduce(n, collectives::kCrowdedTreeBytes - 4, p), Algorithm::kTree) << n;
    EXPECT_EQ(choose_allreduce(n, collectives::kCrowdedTreeBytes, p), Algorithm::kTree) << n;
    EXPECT_EQ(choose_allreduce(n, std::size_t{256} << 20, p), Algorithm::kTree) << n;
  }
  // Two ranks: the tree is one link each way, no better than the ring.
  EXPECT_EQ(choose_allreduce(2, std::size_t{256} << 20, p), Algorithm::kRing);
}

TEST(CostModel, JobsWithAHierarchyTakeItFromItsThreshold) {
  CostParams p;
  p.hierarchical = true;
  for (int n : {4, 6, 8, 16}) {
    EXPECT_EQ(choose_allreduce(n, 8, p), Algorithm::kRecursiveDoubling) << n;
    EXPECT_NE(choose_allreduce(n, collectives::kHierarchicalBytes - 4, p),
              Algorithm::kHierarchical)
        << n;
    EXPECT_EQ(choose_allreduce(n, collectives::kHierarchicalBytes, p), Algorithm::kHierarchical)
        << n;
  }
}

TEST(CostModel, PredictionsGrowWithTheBuffer) {
  const CostParams p;
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner})
    EXPECT_LT(predict_allreduce_seconds(a, 8, 1024, p),
              predict_allreduce_seconds(a, 8, 1 << 24, p));
  EXPECT_EQ(predict_allreduce_seconds(Algorithm::kRing, 1, 1 << 20, p), 0.0);
}

TEST(CostModel, ConstantsComeFromTheEnvironment) {
  ::setenv("HOOP_ALPHA_US", "100", 1);
  ::setenv("HOOP_BETA_NS_PER_BYTE", "2", 1);
  auto p = collectives::cost_params_from_env();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_DOUBLE_EQ(p->alpha_s, 100e-6);
  EXPECT_DOUBLE_EQ(p->beta_s_per_byte, 2e-9);
  ::setenv("HOOP_ALPHA_US", "fast", 1);
  auto bad = collectives::cost_params_from_env();
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("HOOP_ALPHA_US"), std::string::npos);
  ::unsetenv("HOOP_ALPHA_US");
  ::unsetenv("HOOP_BETA_NS_PER_BYTE");
}

TEST(Algorithms, NamesRoundTrip) {
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRecursiveDoubling,
                      Algorithm::kRabenseifner, Algorithm::kTree, Algorithm::kHierarchical})
    EXPECT_EQ(parse_algorithm(algorithm_name(a)), a);
  EXPECT_EQ(parse_algorithm("rd"), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(parse_algorithm("hier"), Algorithm::kHierarchical);
  EXPECT_EQ(parse_algorithm("rab"), Algorithm::kRabenseifner);
  EXPECT_EQ(parse_algorithm("bogus"), std::nullopt);
}

/// A one-rank communicator: no store, no peers.
std::unique_ptr<Communicator> solo() {
  BootstrapInfo info;
  auto c = Communicator::create(info, nullptr);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return std::move(c).value();
}

TEST(Communicator, UnknownTransportOrAlgorithmIsRefused) {
  BootstrapInfo info;
  CommunicatorOptions o;
  o.transport = "carrier-pigeon";
  EXPECT_EQ(Communicator::create(info, nullptr, o).status().code(), StatusCode::kInvalidArgument);
  ::setenv("HOOP_ALGO", "bogus", 1);
  auto c = Communicator::create(info, nullptr);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("HOOP_ALGO"), std::string::npos);
  ::setenv("HOOP_ALGO", "rabenseifner", 1);
  auto d = Communicator::create(info, nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->forced_algorithm(), Algorithm::kRabenseifner);
  ::unsetenv("HOOP_ALGO");
  info.size = 2;
  EXPECT_EQ(Communicator::create(info, nullptr).status().code(), StatusCode::kInvalidArgument);
}

TEST(Validation, BadArgumentsNameTheArgument) {
  auto comm = solo();
  float x[4] = {1, 2, 3, 4};
  AllreduceOptions ar;
  ar.count = 4;
  Status s = allreduce(*comm, ar);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("output"), std::string::npos) << s.message();
  ar.output = x;
  ar.dtype = static_cast<DataType>(200);
  s = allreduce(*comm, ar);
  EXPECT_NE(s.message().find("dtype"), std::string::npos) << s.message();
  ar.dtype = DataType::kF32;
  ar.op = static_cast<ReduceOp>(9);
  EXPECT_NE(allreduce(*comm, ar).message().find("op"), std::string::npos);
  ar.op = ReduceOp::kSum;
  ar.count = SIZE_MAX / 2;
  EXPECT_EQ(allreduce(*comm, ar).code(), StatusCode::kInvalidArgument);

  BroadcastOptions bc;
  bc.buffer = x;
  bc.count = 1;
  bc.root = 1;
  s = broadcast(*comm, bc);
  EXPECT_NE(s.message().find("root"), std::string::npos) << s.message();

  std::vector<std::size_t> two = {1, 1};
  AllgathervOptions agv;
  agv.output = x;
  agv.counts = two;
  s = allgatherv(*comm, agv);
  EXPECT_NE(s.message().find("counts"), std::string::npos) << s.message();

  AlltoallvOptions av;
  std::vector<std::size_t> one = {1}, other = {2};
  av.input = x;
  av.output = x + 2;
  av.send_counts = one;
  av.recv_counts = other;
  EXPECT_EQ(alltoallv(*comm, av).code(), StatusCode::kInvalidArgument);
  av.recv_counts = two;
  s = alltoallv(*comm, av);
  EXPECT_NE(s.message().find("recv_counts"), std::string::npos) << s.message();

  ReduceScatterOptions rs;
  rs.count = 3;
  EXPECT_EQ(reduce_scatter(*comm, rs).code(), StatusCode::kInvalidArgument);
}

TEST(Validation, AllreduceListNamesTheBuffer) {
  auto comm = solo();
  float x[4] = {1, 2, 3, 4};
  std::vector<AllreduceBuffer> list = {{nullptr, x, 2}, {nullptr, nullptr, 2}};
  AllreduceListOptions o;
  o.buffers = list;
  Status s = allreduce_list(*comm, o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("buffers[1].output"), std::string::npos) << s.message();
  list[1] = {nullptr, x + 2, SIZE_MAX - 1};
  EXPECT_EQ(allreduce_list(*comm, o).code(), StatusCode::kInvalidArgument);
  o.op = static_cast<ReduceOp>(9);
  list[1].count = 2;
  EXPECT_NE(allreduce_list(*comm, o).message().find("op"), std::string::npos);
  // One rank: the buffers keep their values; none of them, nothing to do.
  o.op = ReduceOp::kSum;
  ASSERT_TRUE(allreduce_list(*comm, o).ok());
  EXPECT_EQ(x[3], 4.0f);
  EXPECT_TRUE(allreduce_list(*comm, AllreduceListOptions{}).ok());
}

TEST(Communicator, OneRankCollectivesCopyTheInput) {
  auto comm = solo();
  const std::vector<float> in = {1, 2, 3};
  std::vector<float> out(3, 0);
  AllreduceOptions ar;
  ar.input = in.data();
  ar.output = out.data();
  ar.count = 3;
  ar.op = ReduceOp::kAvg;
  ASSERT_TRUE(allreduce(*comm, ar).ok());
  EXPECT_EQ(out, in);
  EXPECT_TRUE(barrier(*comm).ok());
  // Zero elements: null buffers are fine.
  AllreduceOptions empty;
  EXPECT_TRUE(allreduce(*comm, empty).ok());
}

// The allreduce table is the one list of algorithm names: every name and alias it holds parses
// back to its algorithm, is accepted by HOOP_ALGO and by validation, every candidate of the cost
// model has a prediction, and HOOP_ALGO accepts nothing the table lacks.
TEST(AllreduceTable, EveryNameIsAcceptedEverywhere) {
  for (const collectives::AllreduceEntry& e : collectives::allreduce_algorithms()) {
    EXPECT_EQ(algorithm_name(e.id), e.name);
    EXPECT_TRUE(collectives::check_algorithm(e.id).ok()) << e.name;
    EXPECT_EQ(e.run == nullptr, e.id == Algorithm::kHierarchical) << e.name;
    for (std::string_view name : {e.name, e.alias}) {
      if (name.empty()) continue;
      EXPECT_EQ(parse_algorithm(name), e.id) << name;
      const config::EnvLookup env = [&](std::string_view var) -> std::optional<std::string> {
        if (var == "HOOP_ALGO") return std::string(name);
        return std::nullopt;
      };
      const Result<std::string> got = config::get_string("HOOP_ALGO", env);
      EXPECT_TRUE(got.ok()) << name << ": " << got.status().to_string();
    }
    if (e.cost_model_candidate) {
      EXPECT_LT(collectives::predict_allreduce_seconds(e.id, 4, std::size_t{1} << 20,
                                                       collectives::CostParams{}),
                1e299)
          << e.name;
    }
  }
  for (int v = 1; v <= static_cast<int>(Algorithm::kHierarchical); ++v)
    EXPECT_NE(collectives::find_allreduce(static_cast<Algorithm>(v)), nullptr) << v;
  const config::Var* var = config::find_var("HOOP_ALGO");
  ASSERT_NE(var, nullptr);
  std::string_view rest = var->choices;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view choice = rest.substr(0, comma);
    EXPECT_TRUE(parse_algorithm(choice).has_value()) << "HOOP_ALGO accepts '" << choice
                                                     << "', which no algorithm is called";
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  EXPECT_FALSE(parse_algorithm("quadtree").has_value());
}

}  // namespace
}  // namespace hoop
