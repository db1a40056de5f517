// The printable summary of a made-up job, checked line by line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "connect/connect.h"
#include "topology/topology.h"
#include "transports/registry.h"

namespace hoop::topology {
namespace {

using ::testing::HasSubstr;

// The summary with the transport registry's rule, as hoop-topology prints it.
std::string summarize(const Layout& layout, const std::vector<HostHardware>& hardware,
                      const std::string& choice) {
  return summary(layout, hardware, choice, connect::pair_rule(choice));
}

HostHardware host(std::string name, int cores, int pus, std::vector<PciDevice> devices = {}) {
  HostHardware hw;
  hw.hostname = std::move(name);
  hw.packages = 1;
  hw.numa_nodes = 1;
  hw.cores = cores;
  hw.pus = pus;
  hw.usable_pus = pus;
  hw.devices = std::move(devices);
  return hw;
}

TEST(RankRanges, CompressesRuns) {
  EXPECT_EQ(rank_ranges({}), "");
  EXPECT_EQ(rank_ranges({3}), "3");
  EXPECT_EQ(rank_ranges({0, 1}), "0-1");
  EXPECT_EQ(rank_ranges({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
}

TEST(Summary, TwoHostsTwoRanksEach) {
  const Layout layout = group_by_host({"id-a", "id-a", "id-b", "id-b"});
  const std::vector<HostHardware> hw = {
      host("ns1", 2, 2, {{"nic", "eth0", "0000:00:03.0", 0}}),
      host("ns2", 4, 8,
           {{"nic", "ens1f0/mlx5_0", "0000:3b:00.0", 0},
            {"gpu", "cuda0", "0000:5e:00.0", -1},
            {"nic", "veth1", "", -1}}),
  };
  EXPECT_EQ(summarize(layout, hw, "auto"),
            "hosts: 2, ranks: 4 (2 per host)\n"
            "host 0: ns1 (id id-a)\n"
            "  ranks: 0-1\n"
            "  cpus: 1 package, 1 NUMA node, 2 cores, 2 PUs (2 usable by rank 0)\n"
            "  nics: eth0 (0000:00:03.0, NUMA 0)\n"
            "  gpus: none\n"
            "host 1: ns2 (id id-b)\n"
            "  ranks: 2-3\n"
            "  cpus: 1 package, 1 NUMA node, 4 cores, 8 PUs (8 usable by rank 2)\n"
            "  nics: ens1f0/mlx5_0 (0000:3b:00.0, NUMA 0), veth1\n"
            "  gpus: cuda0 (0000:5e:00.0)\n"
            "transport: shm within a host, tcp across hosts (HOOP_TRANSPORT=auto)\n"
            "ring: 0-1 | 2-3 (crosses between hosts 2 times)\n");
}

// Across hosts "auto" takes UCX only where every host has an RDMA device (and UCX is built).
TEST(Summary, UcxAcrossHostsOnlyWhenEveryHostHasRdma) {
  const Layout layout = group_by_host({"a", "a", "b", "b"});
  HostHardware with = host("ib1", 2, 2), without = host("eth", 2, 2);
  with.rdma = true;
  const std::string across = transports::transport_built("ucx") ? "ucx" : "tcp";
  EXPECT_THAT(summarize(layout, {with, with}, "auto"),
              HasSubstr("transport: shm within a host, " + across + " across hosts"));
  EXPECT_THAT(summarize(layout, {with, without}, "auto"),
              HasSubstr("transport: shm within a host, tcp across hosts"));
  EXPECT_THAT(summarize(layout, {with}, "auto"),
              HasSubstr("transport: shm within a host, tcp across hosts"));
  EXPECT_THAT(summarize(layout, {with, with}, "tcp"), HasSubstr("transport: tcp between every pair"));
}

TEST(Summary, InterleavedUnevenHostsAndOversubscription) {
  const Layout layout = group_by_host({"a", "b", "a", "a"});
  const std::string text = summarize(layout, {host("one", 1, 2), host("two", 1, 1)}, "tcp");
  EXPECT_THAT(text, HasSubstr("hosts: 2, ranks: 4 (1 to 3 per host)\n"));
  EXPECT_THAT(text, HasSubstr("  ranks: 0,2-3 (3 ranks on 2 PUs: oversubscribed)\n"));
  EXPECT_THAT(text,
              HasSubstr("  cpus: 1 package, 1 NUMA node, 1 core, 1 PU (1 usable by rank 1)\n"));
  EXPECT_THAT(text, HasSubstr("transport: tcp between every pair (HOOP_TRANSPORT=tcp)\n"));
  EXPECT_THAT(text, HasSubstr("ring: 0,2-3 | 1 (crosses between hosts 2 times)\n"));
}

TEST(Summary, OneHostAndOneRank) {
  const std::string one_host = summarize(group_by_host({"a", "a", "a"}), {host("h", 2, 2)}, "shm");
  EXPECT_THAT(one_host, HasSubstr("hosts: 1, ranks: 3 (3 per host)\n"));
  EXPECT_THAT(one_host, HasSubstr("transport: shm within the host (HOOP_TRANSPORT=shm)\n"));
  EXPECT_THAT(one_host, HasSubstr("ring: 0-2 (within one host)\n"));

  const std::string one_rank = summarize(group_by_host({"a"}), {host("h", 2, 2)}, "auto");
  EXPECT_THAT(one_rank, HasSubstr("transport: none, one rank (HOOP_TRANSPORT=auto)\n"));
  EXPECT_THAT(one_rank, HasSubstr("ring: 0 (within one host)\n"));
}

TEST(Summary, ShmAcrossHostsIsShownAsAnError) {
  const std::string text = summarize(group_by_host({"a", "b"}), {}, "shm");
  EXPECT_THAT(text, HasSubstr("transport: error: HOOP_TRANSPORT=shm"));
  EXPECT_THAT(text, HasSubstr("hardware: unknown"));
}

}  // namespace
}  // namespace hoop::topology
