// Copies whose stores bypass the writer's caches, for data another core reads next.
#pragma once

#include <cstddef>

namespace hoop {

/// Copies `bytes` bytes from `src` to `dst` (not overlapping) with non-temporal stores where
/// the CPU has them (x86: SSE2), else as memcpy; the stores are complete and ordered before
/// any later store (a release that publishes them) when it returns. For a payload that another
/// core reads and this one does not: the reader then takes the lines from memory rather than
/// snooping them, modified, out of this core's cache, which is slower on the 2-core VM the
/// benchmarks ran on (docs/BENCHMARKS.md, "Slot payloads that only other ranks read").
void copy_streaming(void* dst, const void* src, std::size_t bytes);

}  // namespace hoop
