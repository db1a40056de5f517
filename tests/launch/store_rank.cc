// A rank for hooprun's tests: joins the store hooprun hosts, using only what hooprun put in
// its environment, and checks that every rank of the job got there.
#include <cstdio>
#include <string>
#include <vector>

#include "hoop/rendezvous.h"

namespace {

int run() {
  hoop::Result<hoop::BootstrapInfo> info = hoop::bootstrap_from_env();
  if (!info.ok()) {
    std::fprintf(stderr, "bootstrap: %s\n", info.status().to_string().c_str());
    return 1;
  }
  hoop::Result<std::unique_ptr<hoop::Store>> store = hoop::connect_store(*info);
  if (!store.ok()) {
    std::fprintf(stderr, "connect: %s\n", store.status().to_string().c_str());
    return 1;
  }
  const std::string key = "launch_test/rank/" + std::to_string(info->rank);
  if (hoop::Status s = (*store)->set(key, std::to_string(info->rank)); !s.ok()) {
    std::fprintf(stderr, "set: %s\n", s.to_string().c_str());
    return 1;
  }
  std::vector<std::string> keys;
  for (int r = 0; r < info->size; ++r) keys.push_back("launch_test/rank/" + std::to_string(r));
  if (hoop::Status s = (*store)->wait(keys, info->timeout); !s.ok()) {
    std::fprintf(stderr, "wait: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("rank %d saw all %d ranks\n", info->rank, info->size);
  return 0;
}

}  // namespace

int main() { return run(); }
