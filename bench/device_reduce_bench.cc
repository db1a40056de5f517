// Bandwidth of the GPU reduction kernels (hoop::device::reduce_into) next to a device-to-device
// cudaMemcpy of the same size, in one run, so the ratio is taken on the same GPU state. Bytes
// count memory traffic: a copy of N bytes moves 2N (read, write), reduce_into over N bytes 3N
// (read dst, read src, write dst). Each iteration is timed with CUDA events around enough
// back-to-back launches to last about a millisecond; report the median of repetitions:
//
//   build/bin/bench_device_reduce --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Without a usable GPU it registers nothing and says why.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "bench/common/gbench_args.h"
#include "device/device.h"
#include "hoop/core.h"

namespace {

namespace device = hoop::device;

constexpr std::size_t kMiB = 1024 * 1024;
constexpr std::size_t kLargest = 256 * kMiB;
// Launches per timed iteration: enough bytes that launch gaps and event resolution vanish.
constexpr std::size_t kBytesPerIteration = 1024 * kMiB;

struct Setup {
  device::Stream stream;
  device::Buffer dst;
  device::Buffer src;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

// 0x3c in every byte is a normal, finite number in each float format, as in bench_reduce, so
// no NaN or denormal path can distort a result.
hoop::Status prepare(Setup& s) {
  HOOP_ASSIGN_OR_RETURN(s.stream, device::Stream::create(0));
  HOOP_ASSIGN_OR_RETURN(s.dst, device::Buffer::allocate(0, kLargest));
  HOOP_ASSIGN_OR_RETURN(s.src, device::Buffer::allocate(0, kLargest));
  for (const device::Buffer* b : {&s.dst, &s.src}) {
    if (cudaMemset(b->data(), 0x3c, kLargest) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      return hoop::io_error("cudaMemset of the benchmark buffers failed");
    }
  }
  if (cudaEventCreate(&s.start) != cudaSuccess || cudaEventCreate(&s.stop) != cudaSuccess) {
    return hoop::io_error("cudaEventCreate failed");
  }
  return hoop::Status::success();
}

Setup& setup() {
  static Setup s;
  return s;
}

// Times `launches` calls of `one` on the benchmark stream; the bytes moved per call are
// `traffic`.
template <class One>
void run_timed(benchmark::State& state, std::size_t bytes, std::size_t traffic, One one) {
  Setup& s = setup();
  auto* stream = static_cast<cudaStream_t>(s.stream.handle());
  const std::size_t launches = std::max<std::size_t>(1, kBytesPerIteration / bytes);
  for (auto _ : state) {
    if (cudaEventRecord(s.start, stream) != cudaSuccess) {
      state.SkipWithError("cudaEventRecord failed");
      return;
    }
    for (std::size_t i = 0; i < launches; ++i) {
      if (const hoop::Status status = one(stream); !status.ok()) {
        state.SkipWithError(status.to_string().c_str());
        return;
      }
    }
    float ms = 0;
    if (cudaEventRecord(s.stop, stream) != cudaSuccess ||
        cudaEventSynchronize(s.stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, s.start, s.stop) != cudaSuccess) {
      state.SkipWithError("timing with CUDA events failed");
      return;
    }
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * launches * traffic));
}

void bm_memcpy(benchmark::State& state, std::size_t bytes) {
  Setup& s = setup();
  run_timed(state, bytes, 2 * bytes, [&](cudaStream_t stream) {
    if (cudaMemcpyAsync(s.dst.data(), s.src.data(), bytes, cudaMemcpyDeviceToDevice, stream) ==
        cudaSuccess) {
      return hoop::Status::success();
    }
    return hoop::io_error("cudaMemcpyAsync (device to device) failed");
  });
}

void bm_reduce_into(benchmark::State& state, hoop::DataType dtype, std::size_t bytes) {
  Setup& s = setup();
  const std::size_t count = bytes / hoop::dtype_size(dtype);
  run_timed(state, bytes, 3 * bytes, [&](cudaStream_t stream) {
    return device::reduce_into(s.dst.data(), s.src.data(), count, dtype, hoop::ReduceOp::kSum,
                               stream);
  });
}

std::string size_label(std::size_t bytes) { return std::to_string(bytes / kMiB) + "MiB"; }

void register_all() {
  for (std::size_t bytes = kMiB; bytes <= kLargest; bytes *= 4) {
    benchmark::RegisterBenchmark(("BM_DeviceMemcpy/" + size_label(bytes)).c_str(), bm_memcpy, bytes)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    for (const hoop::DataType dtype : {hoop::DataType::kF32, hoop::DataType::kF16,
                                       hoop::DataType::kBF16, hoop::DataType::kF64}) {
      const std::string name = "BM_DeviceReduceInto/" + std::string(hoop::dtype_name(dtype)) +
                               "_sum/" + size_label(bytes);
      benchmark::RegisterBenchmark(name.c_str(), bm_reduce_into, dtype, bytes)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto exit_status = hoop::bench::parse_gbench_args(
          &argc, argv, "bench_device_reduce",
          "Bandwidth of hoop's GPU reduction kernels against a device-to-device copy of the same size.\n  e.g. bench_device_reduce --benchmark_repetitions=5 --benchmark_report_aggregates_only=true\n")) {
    return *exit_status;
  }
  if (device::device_count() == 0) {
    std::printf("bench_device_reduce: nothing to measure, no usable CUDA device: %s\n",
                device::unavailable_reason().c_str());
    return 0;
  }
  if (const hoop::Status s = prepare(setup()); !s.ok()) {
    std::fprintf(stderr, "bench_device_reduce: %s\n", s.to_string().c_str());
    return 1;
  }
  benchmark::AddCustomContext("hoop_device", device::describe());
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Released here: from static destructors, CUDA may already be unloading.
  (void)cudaEventDestroy(setup().start);
  (void)cudaEventDestroy(setup().stop);
  setup() = Setup{};
  return 0;
}
