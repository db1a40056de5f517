// hoop-bench -g: the collectives run on CUDA device buffers, one device per rank, filled and
// checked through host copies so the table reads as it does for host memory.
#pragma once

#include <cstddef>
#include <memory>

#include "bench/common/bench_buffer.h"
#include "hoop/core.h"

namespace hoop::bench {

/// This rank's device: its local rank (HOOP_LOCAL_RANK and the launchers' equivalents) modulo
/// the number of devices, made current. invalid_argument naming why when no CUDA device is
/// usable (a build without CUDA, no driver, no device).
Result<int> choose_device();

/// A benchmark buffer of `bytes` bytes on `device` (cudaMalloc), with a page-aligned host copy.
Result<std::unique_ptr<BenchBuffer>> device_buffer(int device, std::size_t bytes);

}  // namespace hoop::bench
