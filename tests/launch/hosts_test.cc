#include "launch/hosts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>

#include "core/socket.h"

namespace hoop::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseHostsTest, ReadsHorovodsForms) {
  Result<std::vector<HostSlots>> hosts = parse_hosts("a:2,b,c.example.com:16");
  ASSERT_TRUE(hosts.ok()) << hosts.status().to_string();
  EXPECT_THAT(*hosts,
              ElementsAre(HostSlots{"a", 2}, HostSlots{"b", 1}, HostSlots{"c.example.com", 16}));
}

TEST(ParseHostsTest, RejectsBadEntriesNamingThem) {
  for (const char* text :
       {"", "a:2,", ",a", "a:0", "a:-1", "a:x", "a:2x", ":3", "a:", "a,a:2", "a:99999999999"}) {
    Result<std::vector<HostSlots>> hosts = parse_hosts(text);
    ASSERT_FALSE(hosts.ok()) << text;
    EXPECT_THAT(hosts.status().message(), HasSubstr("bad host")) << text;
  }
  EXPECT_THAT(parse_hosts("a,b,a").status().message(), HasSubstr("listed twice"));
}

TEST(PlaceRanksTest, FillsHostsInOrder) {
  const std::vector<HostSlots> hosts{{"a", 2}, {"b", 3}, {"c", 1}};
  Result<Placement> p = place_ranks(hosts, 6);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_THAT(p->hosts, ElementsAre("a", "b", "c"));
  EXPECT_THAT(p->ranks, ElementsAre(RankPlace{0, 0, 2}, RankPlace{0, 1, 2}, RankPlace{1, 0, 3},
                                    RankPlace{1, 1, 3}, RankPlace{1, 2, 3}, RankPlace{2, 0, 1}));
}

TEST(PlaceRanksTest, FewerRanksThanSlotsLeaveTrailingHostsOut) {
  const std::vector<HostSlots> hosts{{"a", 2}, {"b", 2}, {"c", 2}};
  Result<Placement> p = place_ranks(hosts, 3);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_THAT(p->hosts, ElementsAre("a", "b"));
  EXPECT_THAT(p->ranks, ElementsAre(RankPlace{0, 0, 2}, RankPlace{0, 1, 2}, RankPlace{1, 0, 1}));
}

TEST(PlaceRanksTest, MoreRanksThanSlotsNamesBothNumbers) {
  const std::vector<HostSlots> hosts{{"a", 2}, {"b", 2}};
  Result<Placement> p = place_ranks(hosts, 5);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("-np 5 exceeds the 4 slots"));
}

TEST(TotalSlotsTest, Saturates) {
  const std::vector<HostSlots> hosts{{"a", INT_MAX}, {"b", INT_MAX}};
  EXPECT_EQ(total_slots(hosts), INT_MAX);
}

TEST(IsLocalHostTest, KnowsThisMachinesNames) {
  EXPECT_TRUE(is_local_host("localhost"));
  EXPECT_TRUE(is_local_host("127.0.0.1"));
  char name[HOST_NAME_MAX + 1] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  EXPECT_TRUE(is_local_host(name));
  EXPECT_FALSE(is_local_host("hoop-no-such-host.invalid"));
  EXPECT_FALSE(is_local_host(""));
}

TEST(ExpandSpawnerTest, SplitsWordsAndReplacesEveryHost) {
  EXPECT_THAT(expand_spawner("ip netns exec {host}", "ns1"),
              ElementsAre("ip", "netns", "exec", "ns1"));
  EXPECT_THAT(expand_spawner("  env\tHOST={host} TAG={host}-{host}  ", "b"),
              ElementsAre("env", "HOST=b", "TAG=b-b"));
  // A host name that itself contains the placeholder is not expanded again.
  EXPECT_THAT(expand_spawner("x{host}y", "{host}"), ElementsAre("x{host}y"));
  EXPECT_TRUE(expand_spawner(" \t", "a").empty());
}

TEST(ChooseRendezvousAddrTest, GivenAddressWins) {
  const std::vector<std::string> hosts{"remote-a", "remote-b"};
  EXPECT_EQ(choose_rendezvous_addr(std::string("10.1.2.3"), hosts).value(), "10.1.2.3");
}

TEST(ChooseRendezvousAddrTest, LoopbackWhenEveryHostIsThisMachine) {
  const std::vector<std::string> hosts{"localhost", "127.0.0.1"};
  EXPECT_EQ(choose_rendezvous_addr(std::nullopt, hosts).value(), "127.0.0.1");
}

TEST(ChooseRendezvousAddrTest, AnExternalAddressWhenAHostIsElsewhere) {
  const std::vector<std::string> hosts{"localhost", "remote-b"};
  Result<std::optional<std::string>> external = net::first_external_ipv4();
  ASSERT_TRUE(external.ok()) << external.status().to_string();
  Result<std::string> chosen = choose_rendezvous_addr(std::nullopt, hosts);
  if (!*external) {
    ASSERT_FALSE(chosen.ok());
    EXPECT_THAT(chosen.status().message(), HasSubstr("--rendezvous-addr"));
    return;
  }
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_EQ(*chosen, **external);
  EXPECT_NE(*chosen, "127.0.0.1");
}

}  // namespace
}  // namespace hoop::launch
