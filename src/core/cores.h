// How many cores this process may run on.
#pragma once

#include <sched.h>

#include <algorithm>

namespace hoop {

/// The cores this process may run on (what `nproc` prints); 1 where the affinity is unknown.
inline int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace hoop
