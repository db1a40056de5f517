#include "tests/comm/comm_eager.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace hoop::comm_check {
namespace {

/// Waits up to 60 s for `path` to exist (another rank's signal); false if it never does.
bool wait_for_file(const std::string& path) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(path) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return std::filesystem::exists(path);
}

void create_file(const std::string& path) { std::ofstream{path}; }

}  // namespace

int run_eager(Communicator& comm, const std::string& dir) {
  const int me = comm.rank();
  const int n = comm.size();
  hoop::Status s = hoop::Status::success();
  // The root's broadcasts, each of its own value, all return before the others call any.
  std::vector<float> value(2);
  hoop::BroadcastOptions b;
  b.buffer = value.data();
  b.count = value.size();
  if (me != 0 && !wait_for_file(dir + "/root")) {
    fmt::print("FAIL rank {}: the root never returned from its broadcasts\n", me);
    return 1;
  }
  for (int i = 0; s.ok() && i < kEagerCalls; ++i) {
    value.assign(2, me == 0 ? 42.0f + static_cast<float>(i) : 0.0f);
    s = hoop::broadcast(comm, b);
    if (s.ok() && value[0] != 42.0f + static_cast<float>(i))
      s = hoop::internal_error(fmt::format("broadcast {} gave {}", i, value[0]));
  }
  if (s.ok() && me == 0) create_file(dir + "/root");
  // The others' gathers all return before the root calls any.
  std::vector<float> all(static_cast<std::size_t>(n));
  float mine = 0;
  hoop::GatherOptions g;
  g.input = &mine;
  g.output = all.data();
  g.count = 1;
  for (int r = 1; s.ok() && me == 0 && r < n; ++r)
    if (!wait_for_file(fmt::format("{}/rank{}", dir, r)))
      s = hoop::internal_error(fmt::format("rank {} never returned from its gathers", r));
  for (int i = 0; s.ok() && i < kEagerCalls; ++i) {
    mine = static_cast<float>(me + 1 + 100 * i);
    s = hoop::gather(comm, g);
    for (int r = 0; s.ok() && me == 0 && r < n; ++r)
      if (all[static_cast<std::size_t>(r)] != static_cast<float>(r + 1 + 100 * i))
        s = hoop::internal_error(fmt::format("gather {} gave {} for rank {}", i, all[r], r));
  }
  if (s.ok() && me != 0) create_file(fmt::format("{}/rank{}", dir, me));
  if (s.ok()) s = hoop::barrier(comm);
  if (!s.ok()) {
    fmt::print("FAIL rank {}: {}\n", me, s.to_string());
    return 1;
  }
  fmt::print("rank {}: eager ok\n", me);
  return 0;
}

}  // namespace hoop::comm_check
