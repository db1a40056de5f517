// The shared benchmark pieces: byte parsing, sizes, bus factors, and the #wrong contract --
// inputs reduced in any order give exactly the expected bits, and a single bad element counts.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "bench/common/bench_data.h"
#include "bench/common/bench_table.h"
#include "src/core/reduce.h"

namespace hoop::bench {
namespace {

TEST(BenchTable, ParsesByteSuffixes) {
  EXPECT_EQ(parse_bytes("8"), 8u);
  EXPECT_EQ(parse_bytes("512K"), 512u << 10);
  EXPECT_EQ(parse_bytes("64m"), 64u << 20);
  EXPECT_EQ(parse_bytes("1G"), std::size_t{1} << 30);
  EXPECT_FALSE(parse_bytes(""));
  EXPECT_FALSE(parse_bytes("M"));
  EXPECT_FALSE(parse_bytes("12X"));
  EXPECT_FALSE(parse_bytes("-1"));
}

TEST(BenchTable, SizesAreWholeElementsFromMinToMax) {
  BenchOptions options;
  options.min_bytes = 8;
  options.max_bytes = 64 << 20;
  options.step_factor = 2;
  const std::vector<std::size_t> sizes = message_sizes(options, 4);
  ASSERT_EQ(sizes.size(), 24u);
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes.back(), 64u << 20);
  options.min_bytes = 1;
  options.max_bytes = 3;
  EXPECT_EQ(message_sizes(options, 8), std::vector<std::size_t>{8});  // at least one element
  // -b 0 starts at one element and still grows (it once looped on 0 x factor forever).
  options.min_bytes = 0;
  options.max_bytes = 64;
  EXPECT_EQ(message_sizes(options, 4), (std::vector<std::size_t>{4, 8, 16, 32, 64}));
  options.step_factor = 1;
  EXPECT_FALSE(validate(options).ok());
}

// nccl-tests' command line, parsed as hoop-bench and the peers parse it.
BenchOptions parse_nccl(std::vector<std::string> args, std::string* error = nullptr) {
  BenchOptions options;
  CLI::App app;
  add_bench_flags(app, options);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last-first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (error != nullptr) *error = e.what();
  }
  return options;
}

TEST(BenchTable, NcclTestsFlagsKeepTheirMeaning) {
  BenchOptions o = parse_nccl(
      {"-b", "1K",  "-e", "4K", "-i", "1K",
       "-m", "4",   "-a", "1",  "-c", "3",
       "-r", "all", "-z", "1",  "-p", "1",
       "-t", "1",   "-G", "0",  "-d", "half,bfloat16,float,double,int8,uint8,int32,int64"});
  EXPECT_TRUE(validate(o).ok()) << validate(o).to_string();
  EXPECT_EQ(message_sizes(o, 4), (std::vector<std::size_t>{1024, 2048, 3072, 4096}));
  EXPECT_EQ(o.agg_iters, 4);
  EXPECT_EQ(o.average, Average::kMean);
  EXPECT_EQ(o.check, 3);
  EXPECT_EQ(o.root, -1);  // every root in turn
  EXPECT_EQ(o.dtypes.size(), 8u);
  EXPECT_EQ(parse_nccl({}).average, Average::kMax);  // hoop's default: the slowest rank
  // -i and -f together: as in nccl-tests, a factor above 1 wins, in either order; a factor
  // of 1 leaves the step in bytes.
  using Args = std::vector<std::string>;
  for (const Args& args : {Args{"-b", "1K", "-e", "64K", "-i", "1M", "-f", "4"},
                           Args{"-b", "1K", "-e", "64K", "-f", "4", "-i", "1M"}}) {
    const BenchOptions both = parse_nccl(args);
    EXPECT_TRUE(validate(both).ok()) << validate(both).to_string();
    EXPECT_EQ(message_sizes(both, 4), (std::vector<std::size_t>{1024, 4096, 16384, 65536}));
  }
  const BenchOptions bytes = parse_nccl({"-b", "1K", "-e", "3K", "-f", "1", "-i", "1K"});
  EXPECT_EQ(message_sizes(bytes, 4), (std::vector<std::size_t>{1024, 2048, 3072}));
  std::string error;
  // What a process with one thread, and host calls, cannot do is an error saying why.
  Status threads = validate(parse_nccl({"-t", "2"}));
  EXPECT_NE(threads.message().find("one thread"), std::string::npos) << threads.to_string();
  Status graphs = validate(parse_nccl({"-G", "1"}));
  EXPECT_NE(graphs.message().find("CUDA graph"), std::string::npos) << graphs.to_string();
  error.clear();
  parse_nccl({"-r", "x"}, &error);
  EXPECT_NE(error.find("all"), std::string::npos) << error;
}

TEST(BenchTable, BusFactorsMatchNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(BenchCollective::kAllreduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(BenchCollective::kAllreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(BenchCollective::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(BenchCollective::kBroadcast, 8), 1.0);
  // reduce_perf and sendrecv_perf: busbw = algbw; gather_perf, scatter_perf: x (n-1)/n.
  EXPECT_DOUBLE_EQ(bus_factor(BenchCollective::kReduce, 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(BenchCollective::kSendrecv, 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(BenchCollective::kGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(BenchCollective::kScatter, 2), 0.5);
  const Measurement m = make_measurement(1000000, 1000.0, 1.5, 0);
  EXPECT_DOUBLE_EQ(m.algbw_gbps, 1.0);
  EXPECT_DOUBLE_EQ(m.busbw_gbps, 1.5);
}

TEST(BenchTable, CollectiveNamesRoundTrip) {
  for (const BenchCollective collective : kAllBenchCollectives)
    EXPECT_EQ(parse_collective(collective_name(collective)), collective);
  EXPECT_EQ(parse_collective("all_reduce"), BenchCollective::kAllreduce);
  EXPECT_EQ(parse_collective("bcast"), BenchCollective::kBroadcast);
  EXPECT_EQ(parse_collective("send_recv"), BenchCollective::kSendrecv);
  EXPECT_EQ(parse_collective("ReduceScatter"), BenchCollective::kReduceScatter);
  EXPECT_FALSE(parse_collective("gatherv"));
  EXPECT_FALSE(parse_collective(""));
}

TEST(BenchTable, SizeCountsEveryRanksBlockWhereNcclTestsDoes) {
  EXPECT_EQ(blocks_per_size(BenchCollective::kGather, 4), 4);
  EXPECT_EQ(blocks_per_size(BenchCollective::kScatter, 3), 3);
  EXPECT_EQ(blocks_per_size(BenchCollective::kReduce, 4), 1);
  EXPECT_EQ(blocks_per_size(BenchCollective::kSendrecv, 4), 1);
  EXPECT_TRUE(is_rooted(BenchCollective::kScatter));
  EXPECT_FALSE(is_rooted(BenchCollective::kSendrecv));
  EXPECT_TRUE(reduces(BenchCollective::kReduce));
  EXPECT_FALSE(reduces(BenchCollective::kGather));
}

TEST(BenchTable, AbsentVariantPrintsNotApplicable) {
  Row row;
  row.bytes = 1000;
  row.count = 250;
  row.out_of_place = make_measurement(1000, 1.0, 1.0, 0);
  row.in_place = not_measured();
  char* text = nullptr;
  std::size_t length = 0;
  std::FILE* out = open_memstream(&text, &length);
  ASSERT_NE(out, nullptr);
  Report report(BenchOptions{}, RunInfo{}, out);
  report.add_row(row);
  std::fclose(out);
  const std::string line(text, length);
  std::free(text);
  EXPECT_NE(line.find("N/A"), std::string::npos) << line;
  EXPECT_DOUBLE_EQ(report.avg_busbw_gbps(), 1.0);  // the absent variant does not count
  EXPECT_NE(report.json().find("\"in_place\": null"), std::string::npos);
}

struct DataCase {
  DataType dtype;
  ReduceOp op;
  int nranks;
};

class AllreduceData : public ::testing::TestWithParam<DataCase> {};

// Reduces every rank's input on the host with hoop's kernels, in rank order and in reverse.
std::vector<unsigned char> host_allreduce(const DataCase& c, std::size_t count, bool reverse) {
  const std::size_t bytes = count * dtype_size(c.dtype);
  std::vector<int> order(static_cast<std::size_t>(c.nranks));
  std::iota(order.begin(), order.end(), 0);
  if (reverse) std::reverse(order.begin(), order.end());
  const ReduceOp op = c.op == ReduceOp::kAvg ? ReduceOp::kSum : c.op;
  std::vector<unsigned char> acc(bytes);
  std::vector<unsigned char> input(bytes);
  fill_allreduce_input(acc.data(), count, c.dtype, c.op, order[0], c.nranks);
  for (std::size_t i = 1; i < order.size(); ++i) {
    fill_allreduce_input(input.data(), count, c.dtype, c.op, order[i], c.nranks);
    EXPECT_TRUE(reduce_into(acc.data(), input.data(), count, c.dtype, op).ok());
  }
  if (c.op == ReduceOp::kAvg) {
    EXPECT_TRUE(divide(acc.data(), count, c.dtype, c.nranks).ok());
  }
  return acc;
}

TEST_P(AllreduceData, ExactInAnyOrderAndEveryErrorCounts) {
  const DataCase c = GetParam();
  ASSERT_TRUE(check_exact(c.dtype, c.op, c.nranks).ok());
  constexpr std::size_t kCount = 1000;  // several periods of the input pattern
  for (const bool reverse : {false, true}) {
    std::vector<unsigned char> result = host_allreduce(c, kCount, reverse);
    EXPECT_EQ(count_allreduce_wrong(result.data(), kCount, c.dtype, c.op, c.nranks), 0);
    result[dtype_size(c.dtype) * 17] ^= 0x01;  // lowest bit of element 17
    EXPECT_EQ(count_allreduce_wrong(result.data(), kCount, c.dtype, c.op, c.nranks), 1);
  }
  std::vector<unsigned char> stale(kCount * dtype_size(c.dtype));
  poison(stale.data(), kCount, c.dtype);
  EXPECT_EQ(count_allreduce_wrong(stale.data(), kCount, c.dtype, c.op, c.nranks),
            static_cast<std::int64_t>(kCount));
}

std::vector<DataCase> all_cases() {
  std::vector<DataCase> cases;
  for (const DataType dtype : kAllDataTypes)
    for (const ReduceOp op : kAllReduceOps)
      for (const int n : {1, 2, 3, 4, 7})
        if (check_exact(dtype, op, n).ok()) cases.push_back({dtype, op, n});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllCases, AllreduceData, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<DataCase>& param_info) {
                           const DataCase& c = param_info.param;
                           return std::string(dtype_name(c.dtype)) + "_" +
                                  std::string(op_name(c.op)) + "_n" + std::to_string(c.nranks);
                         });

TEST(AllreduceData, RefusesRankCountsThatOverflowTheType) {
  EXPECT_TRUE(check_exact(DataType::kBF16, ReduceOp::kSum, 64).ok());
  EXPECT_FALSE(check_exact(DataType::kBF16, ReduceOp::kSum, 65).ok());
  EXPECT_FALSE(check_exact(DataType::kI8, ReduceOp::kProd, 32).ok());
  EXPECT_TRUE(check_exact(DataType::kF32, ReduceOp::kAvg, 1024).ok());
}

}  // namespace
}  // namespace hoop::bench
