// Simulated hosts for the rank programs that tests launch on one machine: HOOP_HOST_ID makes
// blocks of consecutive ranks count as one host each, so that pairs on one "host" use shared
// memory, the others TCP, and the hierarchical allreduce has hosts to work across.
#pragma once

#include <fmt/format.h>

#include <cstdlib>

namespace hoop::comm_check {

/// Sets HOOP_HOST_ID so that the ranks form `hosts` simulated hosts of consecutive ranks
/// (ceil(size / hosts) ranks each, the last host possibly fewer). Before Communicator::create.
inline void simulate_hosts(int hosts) {
  const char* rank = std::getenv("HOOP_RANK");
  const char* size = std::getenv("HOOP_SIZE");
  if (rank == nullptr || size == nullptr || hosts < 1) return;
  const int n = std::atoi(size);
  const int per_host = (n + hosts - 1) / hosts;
  ::setenv("HOOP_HOST_ID", fmt::format("simulated-host-{}", std::atoi(rank) / per_host).c_str(), 1);
}

/// Whether `size` ranks on `hosts` hosts (simulated or real) can run the hierarchical
/// allreduce: two or more hosts with the same number of ranks, at least two, on each.
inline bool hierarchical_possible(int size, int hosts) {
  return hosts > 1 && size % hosts == 0 && size / hosts >= 2;
}

}  // namespace hoop::comm_check
