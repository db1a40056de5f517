// The device route (device_route.h) over its whole table: every HOOP_GPU_BACKEND, job shape,
// build and call, checked against the rules the route promises, and the cases that once went
// wrong on a GPU by name. Pure functions: no device, no processes.
#include "collectives/algorithms/device_route.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

namespace hoop::collectives {
namespace {

using ::testing::HasSubstr;

constexpr GpuBackend kBackends[] = {GpuBackend::kAuto, GpuBackend::kNccl, GpuBackend::kHoop,
                                    GpuBackend::kStaging};
constexpr Collective kCollectives[] = {
    Collective::kAllreduce,     Collective::kBroadcast,     Collective::kAllgather,
    Collective::kAllgatherv,    Collective::kReduceScatter, Collective::kAlltoall,
    Collective::kAlltoallv,     Collective::kReduce,        Collective::kGather,
    Collective::kGatherv,       Collective::kScatter,       Collective::kScatterv,
    Collective::kReduceScatterv};

/// Every fact combination a job can present.
std::vector<RouteFacts> all_facts() {
  // Counted in mixed radix: backend (4), ranks (3), ranks per GPU (3), and two values each of
  // store, one host, NCCL, IPC, MPS and the small-call threshold.
  constexpr int kCombinations = 4 * 3 * 3 * 2 * 2 * 2 * 2 * 2 * 2;
  std::vector<RouteFacts> out;
  for (int i = 0; i < kCombinations; ++i) {
    int k = i;
    auto digit = [&k](int radix) {
      const int d = k % radix;
      k /= radix;
      return d;
    };
    RouteFacts f;
    f.asked = kBackends[digit(4)];
    f.ranks = std::array{1, 2, 4}[digit(3)];
    const int per_gpu = digit(3);
    f.store = digit(2) == 1;
    f.one_host = digit(2) == 1 || f.ranks == 1;
    // One rank uses one GPU; without a store nobody knows (0).
    f.ranks_per_gpu = f.ranks == 1 ? 1 : !f.store ? 0 : std::max(per_gpu, 1);
    if (f.ranks_per_gpu > 1) f.shared_gpu = "ranks 0 and 1 use cuda:0 of host h";
    f.nccl = digit(2) == 1;
    f.ipc = digit(2) == 1;
    f.mps = digit(2) == 1;
    f.ipc_min_bytes = digit(2) == 1 ? std::size_t{256} << 10 : 0;
    out.push_back(f);
  }
  return out;
}

/// Every call: each collective with each dtype and op (Adasum for the allreduce), and
/// point-to-point calls, each small, large and of a size the ranks do not share.
std::vector<RouteCall> all_calls() {
  std::vector<RouteCall> out;
  for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 20, RouteCall::kUnknownBytes}) {
    for (Collective kind : kCollectives)
      for (DataType dtype : kAllDataTypes) {
        for (ReduceOp op : kAllReduceOps) out.push_back({kind, dtype, op, false, bytes});
        if (kind == Collective::kAllreduce)
          out.push_back({kind, dtype, ReduceOp::kAdasum, true, bytes});
      }
    for (DataType dtype : kAllDataTypes)
      out.push_back({std::nullopt, dtype, ReduceOp::kSum, true, bytes});
  }
  return out;
}

bool nccl_runs_job(const RouteFacts& f) {
  return f.nccl && (f.ranks == 1 || (f.store && f.ranks_per_gpu == 1));
}

std::string describe(const RouteFacts& f, const RouteCall& c) {
  return fmt::format(
      "asked {}, {} ranks, store {}, one host {}, {} per gpu, nccl {}, ipc {}; {} "
      "{} {}{}",
      static_cast<int>(f.asked), f.ranks, f.store, f.one_host, f.ranks_per_gpu, f.nccl, f.ipc,
      c.kind ? collective_name(*c.kind) : "p2p", dtype_name(c.dtype), op_name(c.op),
      c.host_only ? " (host only)" : "");
}

/// The rules `r` breaks as the route of `c` under `f`; empty when it keeps them all.
std::string broken_rules(const RouteFacts& f, const RouteCall& c, const Result<DeviceRoute>& r) {
  std::string broken;
  auto rule = [&](bool kept, const char* what) {
    if (!kept) broken += std::string(" [") + what + "]";
  };
  const bool device_algorithm = c.kind.has_value() && !c.host_only;
  const bool ipc_can =
      f.one_host && f.ipc && f.store && device_algorithm && c.bytes >= f.ipc_min_bytes;
  if (!r.ok()) {
    rule(f.asked == GpuBackend::kNccl && !nccl_runs_job(f),
         "only an explicit nccl refuses, and only a job NCCL cannot run");
    rule(r.status().message().find("HOOP_GPU_BACKEND=nccl") != std::string::npos,
         "a refusal names the variable");
    return broken;
  }
  rule(!(f.asked == GpuBackend::kNccl && !nccl_runs_job(f)), "nccl refuses a job it cannot run");
  switch (*r) {
    case DeviceRoute::kBackend:
      rule(nccl_moves(c) && nccl_runs_job(f), "NCCL only for what it has, on a job it runs");
      rule(f.asked == GpuBackend::kNccl || (f.asked == GpuBackend::kAuto && f.ranks > 1),
           "NCCL when asked for, or automatic past one rank");
      break;
    case DeviceRoute::kLocal:
      rule(f.ranks == 1 && device_algorithm, "a device copy only on one rank");
      break;
    case DeviceRoute::kTransport:
      rule(f.ranks > 1 && ipc_can,
           "CUDA IPC on one host, with a store and a device algorithm, for a call not small");
      rule(f.asked != GpuBackend::kStaging, "staging never takes CUDA IPC");
      break;
    case DeviceRoute::kStaged:
      if (f.asked != GpuBackend::kStaging || f.ranks == 1) {
        rule(!(f.ranks == 1 && device_algorithm), "one rank copies on the device");
        rule(!ipc_can, "staged only where CUDA IPC cannot move the call");
      }
      break;
  }
  rule(!(f.asked == GpuBackend::kAuto && f.ranks > 1 && nccl_runs_job(f) && nccl_moves(c)) ||
           *r == DeviceRoute::kBackend,
       "auto takes NCCL whenever it has the call and runs the job");
  return broken;
}

TEST(DeviceRoute, EveryFactAndCallFollowsTheRules) {
  const std::vector<RouteFacts> facts = all_facts();
  const std::vector<RouteCall> calls = all_calls();
  int failures = 0;
  for (const RouteFacts& f : facts) {
    for (const RouteCall& c : calls) {
      const std::string broken = broken_rules(f, c, choose_device_route(f, c));
      if (broken.empty() || ++failures > 20) continue;
      ADD_FAILURE() << describe(f, c) << ":" << broken;
    }
  }
  EXPECT_EQ(failures, 0) << "of " << facts.size() * calls.size() << " (facts, call) pairs";
}

RouteFacts job(GpuBackend asked, int ranks, bool nccl) {
  RouteFacts f;
  f.asked = asked;
  f.ranks = ranks;
  f.store = true;
  f.one_host = true;
  f.nccl = nccl;
  f.ipc = true;
  return f;
}

// The GPU suite's failures of 2026-11-27: auto and nccl sent i16 to NCCL, which has no 16-bit
// integers, and stopped.
TEST(DeviceRoute, SixteenBitIntegersNeverReachNcclForAReduction) {
  const RouteCall i16_sum{Collective::kAllreduce, DataType::kI16, ReduceOp::kSum};
  EXPECT_EQ(*choose_device_route(job(GpuBackend::kAuto, 1, true), i16_sum), DeviceRoute::kLocal);
  EXPECT_EQ(*choose_device_route(job(GpuBackend::kNccl, 1, true), i16_sum), DeviceRoute::kLocal);
  EXPECT_EQ(*choose_device_route(job(GpuBackend::kAuto, 2, true), i16_sum),
            DeviceRoute::kTransport);
  EXPECT_EQ(*choose_device_route(job(GpuBackend::kNccl, 2, true), i16_sum),
            DeviceRoute::kTransport);
  const RouteCall i16_rs{Collective::kReduceScatter, DataType::kI16, ReduceOp::kMax};
  EXPECT_EQ(*choose_device_route(job(GpuBackend::kAuto, 4, true), i16_rs), DeviceRoute::kTransport);
  // Moving i16 is NCCL's: it carries the bits as halves.
  const RouteCall i16_bcast{Collective::kBroadcast, DataType::kI16};
  EXPECT_EQ(*choose_device_route(job(GpuBackend::kAuto, 2, true), i16_bcast),
            DeviceRoute::kBackend);
  // Across hosts without NCCL's reduction, host copies.
  RouteFacts two_hosts = job(GpuBackend::kAuto, 2, true);
  two_hosts.one_host = false;
  EXPECT_EQ(*choose_device_route(two_hosts, i16_sum), DeviceRoute::kStaged);
}

// Below HOOP_CUDA_IPC_MIN_BYTES a one-host call goes through pinned host memory and the host's
// one-step slots; a size the ranks do not share (alltoallv) counts as large, so they agree.
TEST(DeviceRoute, SmallCallsOnOneHostAreStaged) {
  RouteFacts f = job(GpuBackend::kHoop, 2, false);
  f.ipc_min_bytes = 256 << 10;
  EXPECT_EQ(*choose_device_route(f, route_call_of(Collective::kAllreduce, DataType::kF32, 8)),
            DeviceRoute::kStaged);
  EXPECT_EQ(*choose_device_route(
                f, route_call_of(Collective::kAllreduce, DataType::kF32, std::size_t{256} << 10)),
            DeviceRoute::kTransport);
  EXPECT_EQ(*choose_device_route(
                f, route_call_of(Collective::kAlltoallv, DataType::kF32, RouteCall::kUnknownBytes)),
            DeviceRoute::kTransport);
  f.ipc_min_bytes = 0;
  EXPECT_EQ(*choose_device_route(f, route_call_of(Collective::kAllreduce, DataType::kF32, 8)),
            DeviceRoute::kTransport);
}

TEST(DeviceRoute, OneRankIsADeviceCopyUnlessNcclIsAskedFor) {
  const RouteCall f32{Collective::kAllreduce, DataType::kF32, ReduceOp::kSum};
  for (GpuBackend b : {GpuBackend::kAuto, GpuBackend::kHoop, GpuBackend::kStaging})
    EXPECT_EQ(*choose_device_route(job(b, 1, true), f32), DeviceRoute::kLocal);
  EXPECT_EQ(*choose_device_route(job(GpuBackend::kNccl, 1, true), f32), DeviceRoute::kBackend);
  // Adasum and point-to-point calls have no device algorithm: host copies.
  const RouteCall adasum{Collective::kAllreduce, DataType::kF32, ReduceOp::kAdasum, true};
  EXPECT_EQ(*choose_device_route(job(GpuBackend::kHoop, 1, false), adasum), DeviceRoute::kStaged);
}

TEST(DeviceRoute, AnExplicitNcclNamesWhyItCannotRunTheJob) {
  const RouteCall f32{Collective::kAllreduce, DataType::kF32, ReduceOp::kSum};
  RouteFacts shared = job(GpuBackend::kNccl, 2, true);
  shared.ranks_per_gpu = 2;
  shared.shared_gpu = "ranks 0 and 1 use cuda:0 of host h";
  Result<DeviceRoute> r = choose_device_route(shared, f32);
  EXPECT_THAT(r.status().message(), HasSubstr("ranks 0 and 1 use cuda:0 of host h"));
  EXPECT_THAT(r.status().message(), HasSubstr("NCCL takes one rank per GPU"));
  shared.asked = GpuBackend::kAuto;
  EXPECT_EQ(*choose_device_route(shared, f32), DeviceRoute::kTransport);
  r = choose_device_route(job(GpuBackend::kNccl, 2, false), f32);
  EXPECT_THAT(r.status().message(), HasSubstr("no NCCL for this device"));
  RouteFacts storeless = job(GpuBackend::kNccl, 2, true);
  storeless.store = false;
  storeless.ranks_per_gpu = 0;
  EXPECT_THAT(choose_device_route(storeless, f32).status().message(),
              HasSubstr("rendezvous store"));
}

TEST(DeviceRoute, RanksSharingAGpuWithoutMpsAreWarnedOnce) {
  RouteFacts f = job(GpuBackend::kAuto, 2, false);
  EXPECT_EQ(sharing_warning(f), "");
  f.ranks_per_gpu = 2;
  f.shared_gpu = "ranks 0 and 1 use cuda:0 of host h";
  EXPECT_THAT(sharing_warning(f), HasSubstr("ranks 0 and 1 use cuda:0 of host h without MPS"));
  EXPECT_THAT(sharing_warning(f), HasSubstr("nvidia-cuda-mps-control -d"));
  f.mps = true;
  EXPECT_EQ(sharing_warning(f), "");
}

TEST(DeviceRoute, BackendNamesParseAndOthersAreRefused) {
  EXPECT_EQ(*parse_gpu_backend("auto"), GpuBackend::kAuto);
  EXPECT_EQ(*parse_gpu_backend("nccl"), GpuBackend::kNccl);
  EXPECT_EQ(*parse_gpu_backend("hoop"), GpuBackend::kHoop);
  EXPECT_EQ(*parse_gpu_backend("staging"), GpuBackend::kStaging);
  EXPECT_THAT(parse_gpu_backend("gloo").status().message(), HasSubstr("HOOP_GPU_BACKEND='gloo'"));
  for (DeviceRoute r :
       {DeviceRoute::kLocal, DeviceRoute::kBackend, DeviceRoute::kTransport, DeviceRoute::kStaged})
    EXPECT_NE(route_name(r), "unknown");
}

}  // namespace
}  // namespace hoop::collectives
