#include "launch/hosts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdio>

#include "core/socket.h"
#include "launch/output.h"
#include "launch/remote.h"
#include "tests/launch/temp_file.h"

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

TEST(ParseHostfileTest, ReadsSlotsColonsBareHostsCommentsAndBlankLines) {
  Result<std::vector<HostSlots>> hosts = parse_hostfile(
      "# the cluster\n"
      "node-a slots=4\n"
      "\n"
      "  node-b:2   # two GPUs\n"
      "node-c\r\n"
      "\t10.0.0.7\tslots=8\n",
      "hosts.txt");
  ASSERT_TRUE(hosts.ok()) << hosts.status().to_string();
  EXPECT_THAT(*hosts, ElementsAre(HostSlots{"node-a", 4}, HostSlots{"node-b", 2},
                                  HostSlots{"node-c", 1}, HostSlots{"10.0.0.7", 8}));
}

TEST(ParseHostfileTest, NamesTheFileAndLineOfAMalformedLine) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"a slots=0", "hosts.txt:2: bad line 'a slots=0': slots must be a positive integer"},
      {"a slots=x", "hosts.txt:2: bad line 'a slots=x': slots must be a positive integer"},
      {"a:0", "hosts.txt:2: bad line 'a:0': slots must be a positive integer"},
      {"a:", "hosts.txt:2: bad line 'a:': slots must be a positive integer"},
      {":4", "hosts.txt:2: bad line ':4': empty host name"},
      {"a b", "hosts.txt:2: bad line 'a b': expected 'host slots=N', 'host:N' or 'host'"},
      {"a slots=2 x", "hosts.txt:2: bad line 'a slots=2 x': expected"},
      {"a max_slots=2", "hosts.txt:2: bad line 'a max_slots=2': expected"},
      {"first", "hosts.txt:2: host 'first' is listed twice (first on line 1)"},
  };
  for (const auto& [line, message] : cases) {
    Result<std::vector<HostSlots>> hosts = parse_hostfile("first\n" + line + "\n", "hosts.txt");
    ASSERT_FALSE(hosts.ok()) << line;
    EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument) << line;
    EXPECT_THAT(hosts.status().message(), HasSubstr(message)) << line;
  }
  EXPECT_THAT(parse_hostfile("# nothing\n\n", "empty.txt").status().message(),
              HasSubstr("empty.txt: the hostfile lists no host"));
}

TEST(ReadHostfileTest, ReadsAFileAndNamesOneItCannotRead) {
  const testing::TempFile file("h1 slots=2\nh2\n");
  Result<std::vector<HostSlots>> hosts = read_hostfile(file.path());
  ASSERT_TRUE(hosts.ok()) << hosts.status().to_string();
  EXPECT_THAT(*hosts, ElementsAre(HostSlots{"h1", 2}, HostSlots{"h2", 1}));
  file.remove();
  Result<std::vector<HostSlots>> missing = read_hostfile(file.path());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot read the hostfile '" + file.path() +
                                                    "': No such file or directory"));
}

TEST(HostAccessTest, SpawnerFirstThenThisMachineThenSsh) {
  const SshOptions ssh{2222, "/k/id"};
  EXPECT_EQ(host_access("localhost", std::nullopt, ssh).kind, HostAccess::Kind::kLocal);
  EXPECT_EQ(host_access("127.0.0.2", std::nullopt, ssh).kind, HostAccess::Kind::kSsh);
  const HostAccess spawned = host_access("n1", std::string("ip netns exec {host}"), ssh);
  EXPECT_EQ(spawned.kind, HostAccess::Kind::kSpawner);
  EXPECT_THAT(command_on_host(spawned, {}, std::vector<std::string>{"prog", "a b"}, "/w"),
              ElementsAre("ip", "netns", "exec", "n1", "prog", "a b"));
  const std::vector<std::string> env{"HOOP_RANK=1"};
  EXPECT_THAT(command_on_host(host_access("n2", std::nullopt, ssh), env,
                              std::vector<std::string>{"prog"}, "/w"),
              ElementsAre("ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
                          "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-p", "2222",
                          "-i", "/k/id", "--", "n2", "cd /w && exec env HOOP_RANK=1 prog"));
  const SshOptions bounded{std::nullopt, std::nullopt, 30};
  EXPECT_THAT(command_on_host(host_access("n2", std::nullopt, bounded), {},
                              std::vector<std::string>{"prog"}, "/w"),
              ::testing::Contains("ConnectTimeout=30"));
  EXPECT_EQ(describe_access(host_access("n2", std::nullopt, ssh)), "over ssh (port 2222)");
}

// The remote command line goes through a real shell: every word must come out as it went in.
TEST(RemoteShellCommandTest, EveryWordSurvivesTheShell) {
  const std::vector<std::string> argv{
      "/bin/sh", "-c", "printf '<%s>' \"$X\" \"$0\" \"$@\"; pwd", "it's", "a \"b\" $c `d` \\e", ""};
  const std::vector<std::string> env{"X=one two 'three'"};
  const std::string line = remote_shell_command("/tmp", env, argv);
  FILE* shell = ::popen(("/bin/sh -c " + format_command({line})).c_str(), "r");
  ASSERT_NE(shell, nullptr);
  std::string out;
  char buffer[256];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, shell)) > 0;) out.append(buffer, n);
  ASSERT_EQ(::pclose(shell), 0) << line;
  EXPECT_EQ(out, "<one two 'three'><it's><a \"b\" $c `d` \\e><>/tmp\n") << line;
}

TEST(SshEnvironmentTest, PassesHoopHorovodPathsAndExtrasButNeverTheSecret) {
  const std::vector<std::string> env{"HOOP_RANK=0", "HOOP_SECRET=s3cret", "HOROVOD_FUSION=1",
                                     "PATH=/bin",   "LD_LIBRARY_PATH=/l", "PYTHONPATH=/p",
                                     "HOME=/root",  "MY_VAR=1",           "OTHER=2"};
  const std::vector<std::string> extra{"MY_VAR"};
  EXPECT_THAT(ssh_environment(env, extra),
              ElementsAre("HOOP_RANK=0", "HOROVOD_FUSION=1", "PATH=/bin", "LD_LIBRARY_PATH=/l",
                          "PYTHONPATH=/p", "MY_VAR=1"));
}

TEST(DiscoveredHostsTest, HostsAloneTakeTheDefaultSlots) {
  auto hosts = parse_host_lines("a:2\n# spare\nb\n\n  c:1  \n", "d.sh", 4);
  ASSERT_TRUE(hosts.ok()) << hosts.status().to_string();
  EXPECT_EQ(*hosts, (std::vector<HostSlots>{{"a", 2}, {"b", 4}, {"c", 1}}));
  // No host at all is a job with nowhere to run for now, not an error.
  auto none = parse_host_lines("# nothing yet\n", "d.sh", 1);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto bad = parse_host_lines("a:2\nb:zero\n", "d.sh", 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("d.sh:2"));
  auto twice = parse_host_lines("a\na:3\n", "d.sh", 1);
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), ::testing::HasSubstr("listed twice"));
}

}  // namespace
}  // namespace hoop::launch
