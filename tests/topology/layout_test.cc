// Host ids, grouping ranks into hosts, the ring order and the per-pair transport choice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>

#include "connect/connect.h"
#include "core/config.h"
#include "topology/topology.h"
#include "transports/registry.h"

namespace hoop::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The transport src/connect gives ranks a and b of `l` under `choice`.
Result<std::string> pair_transport(const Layout& l, int a, int b, const std::string& choice,
                                   bool rdma_everywhere = false) {
  return connect::pair_rule(choice)(l.same_host(a, b), rdma_everywhere, l.hosts());
}

// Sets an environment variable for one test and restores the old value after it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(GroupByHost, HostsAreNumberedByTheirLowestRank) {
  const Layout l = group_by_host({"b", "a", "b", "c", "a"});
  EXPECT_EQ(l.size(), 5);
  EXPECT_EQ(l.hosts(), 3);
  EXPECT_THAT(l.host_ids, ElementsAre("b", "a", "c"));
  EXPECT_THAT(l.host_of_rank, ElementsAre(0, 1, 0, 2, 1));
  EXPECT_THAT(l.host_ranks, ElementsAre(ElementsAre(0, 2), ElementsAre(1, 4), ElementsAre(3)));
}

TEST(GroupByHost, EmptyAndSingleRank) {
  EXPECT_EQ(group_by_host({}).hosts(), 0);
  const Layout l = group_by_host({"x"});
  EXPECT_EQ(l.hosts(), 1);
  EXPECT_EQ(l.local_rank(0), 0);
  EXPECT_EQ(l.local_size(0), 1);
  EXPECT_TRUE(l.uniform());
}

TEST(Layout, LocalAndCrossRanks) {
  const Layout l = group_by_host({"b", "a", "b", "c", "a"});
  EXPECT_EQ(l.local_rank(0), 0);
  EXPECT_EQ(l.local_rank(2), 1);
  EXPECT_EQ(l.local_rank(4), 1);
  EXPECT_EQ(l.local_size(3), 1);
  EXPECT_EQ(l.local_size(1), 2);
  EXPECT_EQ(l.cross_rank(3), 2);
  EXPECT_EQ(l.cross_rank(4), 1);
  EXPECT_EQ(l.cross_size(), 3);
  EXPECT_TRUE(l.same_host(1, 4));
  EXPECT_FALSE(l.same_host(0, 1));
  EXPECT_FALSE(l.uniform());
  EXPECT_TRUE(group_by_host({"a", "a", "b", "b"}).uniform());
}

TEST(RingOrder, VisitsEachHostsRanksTogether) {
  EXPECT_THAT(ring_order(group_by_host({"b", "a", "b", "c", "a"})), ElementsAre(0, 2, 1, 4, 3));
  EXPECT_THAT(ring_order(group_by_host({"a", "a", "a"})), ElementsAre(0, 1, 2));
  EXPECT_TRUE(ring_order(group_by_host({})).empty());
}

TEST(PairTransport, AutoTakesShmWithinAHostAndTcpAcross) {
  const Layout l = group_by_host({"a", "a", "b"});
  EXPECT_EQ(*pair_transport(l, 0, 1, "auto"), "shm");
  EXPECT_EQ(*pair_transport(l, 1, 2, "auto"), "tcp");
  EXPECT_EQ(*pair_transport(l, 0, 1, "tcp"), "tcp");
}

TEST(PairTransport, ShmOverSeveralHostsIsRefused) {
  EXPECT_EQ(*pair_transport(group_by_host({"a", "a"}), 0, 1, "shm"), "shm");
  auto r = pair_transport(group_by_host({"a", "b"}), 0, 1, "shm");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("HOOP_TRANSPORT"));
  EXPECT_THAT(r.status().message(), HasSubstr("2 hosts"));
}

TEST(PairTransport, UcxIsForcedOrTakenAcrossHostsWithRdma) {
  const Layout l = group_by_host({"a", "a", "b"});
  auto forced = pair_transport(l, 0, 1, "ucx");
  if (transports::transport_built("ucx")) {
    EXPECT_EQ(*forced, "ucx");
    EXPECT_EQ(*pair_transport(l, 1, 2, "auto", true), "ucx");
  } else {
    ASSERT_FALSE(forced.ok());
    EXPECT_THAT(forced.status().message(), HasSubstr("built without it"));
  }
  EXPECT_EQ(*pair_transport(l, 0, 1, "auto", true), "shm");
  EXPECT_EQ(*pair_transport(l, 1, 2, "auto", false), "tcp");
}

TEST(PairTransport, UnknownChoiceIsRefused) {
  auto r = pair_transport(group_by_host({"a", "a"}), 0, 1, "carrier-pigeon");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("carrier-pigeon"));
}

TEST(LocalHostId, HoopHostIdOverrides) {
  ScopedEnv env("HOOP_HOST_ID", "rack3-node7");
  EXPECT_EQ(*local_host_id(), "rack3-node7");
}

TEST(LocalHostId, DefaultIsTheBootIdAndTheNetworkNamespace) {
  ScopedEnv env("HOOP_HOST_ID", nullptr);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  ASSERT_FALSE(boot_id.empty());
  auto id = local_host_id();
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_TRUE(id->starts_with(boot_id + "/")) << *id;
  EXPECT_GT(id->size(), boot_id.size() + 1) << *id;
  EXPECT_EQ(*local_host_id(), *id);
}

// The registry and HOOP_TRANSPORT name the same transports, and every entry can say what it is.
TEST(TransportRegistry, HoldsWhatHoopTransportAccepts) {
  std::vector<std::string> registered;
  for (const transports::TransportEntry* e : transports::registered_transports()) {
    EXPECT_EQ(e->probe != nullptr, e->built) << e->name;
    EXPECT_EQ(e->connect != nullptr, e->built) << e->name;
    EXPECT_EQ(e->not_built.empty(), e->built) << e->name;
    if (!e->device_memory) registered.emplace_back(e->name);
  }
  std::vector<std::string> accepted;
  std::string_view rest = config::find_var("HOOP_TRANSPORT")->choices;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    if (rest.substr(0, comma) != "auto") accepted.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  std::sort(registered.begin(), registered.end());
  std::sort(accepted.begin(), accepted.end());
  EXPECT_EQ(registered, accepted);
  // auto serves every pair: within a host and across hosts, with and without RDMA.
  for (bool same : {true, false})
    for (bool rdma : {true, false}) EXPECT_TRUE(pair_transport(group_by_host({"a", same ? "a" : "b"}), 0, 1, "auto", rdma).ok());
}

}  // namespace
}  // namespace hoop::topology
