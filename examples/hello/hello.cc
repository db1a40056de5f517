// hello: the smallest hoop program. Every rank prints where it sits in the job, then the
// ranks agree on a random value that rank 0 publishes through the rendezvous store.
//
//   build/bin/hooprun -np 4 build/bin/hello
#include <hoop/rendezvous.h>
#include <hoop/version.h>

#include <cstdio>
#include <random>
#include <string>

namespace {

std::string ack_key(int rank) { return "hello/ack/" + std::to_string(rank); }

int run() {
  const hoop::BootstrapInfo info = hoop::bootstrap_from_env().value();
  std::printf("rank %d of %d (local rank %d of %d, host %d of %d, launcher %s)\n", info.rank,
              info.size, info.local_rank, info.local_size, info.cross_rank, info.cross_size,
              info.launcher.c_str());
  if (info.store_host.empty()) {
    std::printf("rank 0: single process, nothing to agree on\n");
    return 0;
  }
  auto store = hoop::connect_store(info).value();
  if (info.rank == 0) {
    std::random_device rd;
    const std::uint64_t value = (std::uint64_t{rd()} << 32) | rd();
    hoop::throw_if_error(store->set("hello/value", std::to_string(value)));
  }
  const std::string value = store->wait_get("hello/value", info.timeout).value();
  hoop::throw_if_error(store->set(ack_key(info.rank), value));

  std::vector<std::string> acks;
  for (int r = 0; r < info.size; ++r) acks.push_back(ack_key(r));
  hoop::throw_if_error(store->wait(acks, info.timeout));
  for (int r = 0; r < info.size; ++r) {
    const std::string seen = store->get(ack_key(r)).value();
    if (seen != value) {
      std::fprintf(stderr, "rank %d saw %s but rank %d saw %s\n", info.rank, value.c_str(), r,
                   seen.c_str());
      return 1;
    }
  }
  std::printf("all %d ranks agree on value %s\n", info.size, value.c_str());
  return 0;
}

}  // namespace

constexpr const char* kUsage =
    "Usage: hooprun -np N hello\n"
    "The smallest hoop program: every rank prints where it sits in the job (rank, local rank,\n"
    "host, and the launcher that started it), then the ranks agree on a random value that rank\n"
    "0 publishes through the rendezvous store. It takes no options but --help and --version.\n";

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::puts(hoop::version_line("hello").c_str());
      return 0;
    }
    std::fprintf(stderr, "hello: unknown argument '%s'\n%s", arg.c_str(), kUsage);
    return 2;
  }
  try {
    return run();
  } catch (const hoop::Error& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
  }
}
