// hwloc discovery on this machine, and the text form ranks exchange: round trips, and garbage
// that must be refused with an error instead of crashing or allocating without bound.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "topology/topology.h"

namespace hoop::topology {
namespace {

using ::testing::HasSubstr;

HostHardware sample() {
  HostHardware hw;
  hw.hostname = "node7.example";
  hw.packages = 2;
  hw.numa_nodes = 2;
  hw.cores = 64;
  hw.pus = 128;
  hw.usable_pus = 16;
  hw.devices = {{"nic", "ens1f0/mlx5_0", "0000:3b:00.0", 0},
                {"gpu", "cuda0/nvml0", "0000:5e:00.0", 1},
                {"nic", "eth9 with spaces", "", -1}};
  hw.rdma = true;
  return hw;
}

void expect_equal(const HostHardware& a, const HostHardware& b) {
  EXPECT_EQ(a.hostname, b.hostname);
  EXPECT_EQ(a.packages, b.packages);
  EXPECT_EQ(a.numa_nodes, b.numa_nodes);
  EXPECT_EQ(a.cores, b.cores);
  EXPECT_EQ(a.pus, b.pus);
  EXPECT_EQ(a.usable_pus, b.usable_pus);
  EXPECT_EQ(a.rdma, b.rdma);
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (std::size_t i = 0; i < a.devices.size(); ++i) {
    EXPECT_EQ(a.devices[i].kind, b.devices[i].kind) << i;
    EXPECT_EQ(a.devices[i].name, b.devices[i].name) << i;
    EXPECT_EQ(a.devices[i].bus_id, b.devices[i].bus_id) << i;
    EXPECT_EQ(a.devices[i].numa_node, b.devices[i].numa_node) << i;
  }
}

TEST(HardwareText, RoundTrips) {
  auto decoded = decode_hardware(encode_hardware(sample()));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  expect_equal(*decoded, sample());

  HostHardware empty;
  auto back = decode_hardware(encode_hardware(empty));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_equal(*back, empty);
}

TEST(HardwareText, NewlinesInNamesDoNotSplitRecords) {
  HostHardware hw = sample();
  hw.hostname = "evil\nend";
  hw.devices[0].name = "a\nb";
  auto back = decode_hardware(encode_hardware(hw));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->hostname, "evil?end");
  EXPECT_EQ(back->devices[0].name, "a?b");
}

TEST(HardwareText, MalformedTextNamesTheLine) {
  const std::string good = encode_hardware(sample());
  struct Case {
    std::string text, message;
  };
  const Case cases[] = {
      {"", "ends early"},
      {"hoop-hardware 2\n", "hoop-hardware 1"},
      {good.substr(0, good.size() - 4), "ends early"},
      {good + "x", "after 'end'"},
      {"hoop-hardware 1\nhostname a\npackages -1\n", "line 3"},
      {"hoop-hardware 1\nhostname a\npackages 99999999999999\n", "packages"},
      {"hoop-hardware 1\nhostname a\npackages 1x\n", "packages"},
      {"hoop-hardware 1\nhost a\n", "hostname"},
      {"hoop-hardware 1\nhostname a\npackages 1\nnuma_nodes 1\ncores 1\npus 1\nusable_pus 2\n",
       "exceeds"},
      {"hoop-hardware 1\nhostname a\npackages 1\nnuma_nodes 1\ncores 1\npus 1\nusable_pus 1\n"
       "device tpu - 0 x\nend\n",
       "neither gpu nor nic"},
      {"hoop-hardware 1\nhostname a\npackages 1\nnuma_nodes 1\ncores 1\npus 1\nusable_pus 1\n"
       "device nic - -2 x\nend\n",
       "NUMA"},
      {"hoop-hardware 1\nhostname a\npackages 1\nnuma_nodes 1\ncores 1\npus 1\nusable_pus 1\n"
       "device nic -\nend\n",
       "expected kind"},
      {"hoop-hardware 1\nhostname a\npackages 1\nnuma_nodes 1\ncores 1\npus 1\nusable_pus 1\n"
       "device nic - 0 \nend\n",
       "empty name"},
      {"hoop-hardware 1\nhostname a\npackages 1\nnuma_nodes 1\ncores 1\npus 1\nusable_pus 1\n"
       "rdma 2\nend\n",
       "'rdma 1'"},
  };
  for (const Case& c : cases) {
    auto r = decode_hardware(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(HardwareText, TooManyDevicesAreRefused) {
  std::string text =
      "hoop-hardware 1\nhostname a\npackages 1\nnuma_nodes 1\ncores 1\npus 1\nusable_pus 1\n";
  for (int i = 0; i < 5000; ++i) text += "device nic - 0 eth\n";
  text += "end\n";
  auto r = decode_hardware(text);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("more than"));
}

// Every truncation, every single-byte change and random bytes: decode must answer, never crash
// (the sanitizer build checks for reads out of bounds).
TEST(HardwareText, GarbageNeverCrashes) {
  const std::string good = encode_hardware(sample());
  // Everything up to "end" is needed; only the newline after it may go.
  for (std::size_t n = 0; n + 1 < good.size(); ++n)
    EXPECT_FALSE(decode_hardware(good.substr(0, n)).ok()) << n;
  std::mt19937 rng(42);
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (char c : {'\0', '\n', ' ', '-', '9', '\xff'}) {
      std::string bad = good;
      bad[i] = c;
      (void)decode_hardware(bad);
    }
  }
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 300, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (i % 2 == 0) junk = good.substr(0, rng() % good.size()) + junk;
    EXPECT_FALSE(decode_hardware(junk).ok());
  }
}

TEST(DiscoverHardware, CountsAreSaneOnThisMachine) {
  auto hw = discover_hardware();
  ASSERT_TRUE(hw.ok()) << hw.status().to_string();
  EXPECT_FALSE(hw->hostname.empty());
  EXPECT_GE(hw->packages, 1);
  EXPECT_GE(hw->numa_nodes, 1);
  EXPECT_GE(hw->cores, 1);
  EXPECT_GE(hw->pus, hw->cores);
  EXPECT_GE(hw->usable_pus, 1);
  EXPECT_LE(hw->usable_pus, hw->pus);
  for (const PciDevice& d : hw->devices) {
    EXPECT_TRUE(d.kind == "gpu" || d.kind == "nic") << d.kind;
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.numa_node, -1);
  }
  // What this host reports must survive the trip through the store.
  auto back = decode_hardware(encode_hardware(*hw));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_equal(*back, *hw);
}

}  // namespace
}  // namespace hoop::topology
