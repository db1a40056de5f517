// A pause between two polls of memory another core writes.
#pragma once

namespace hoop {

/// Tells the core that this thread spins: it polls a peer's cache line without hammering it
/// and, with SMT, leaves the sibling thread the core's resources.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace hoop
