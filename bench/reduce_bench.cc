// Throughput of the reduction kernels against memcpy of the same size, in one run, so the
// ratio is taken on the same machine state. Bytes count memory traffic: memcpy of N bytes moves
// 2N (read, write), reduce_into over N bytes moves 3N (read dst, read src, write dst). Rates use
// Google Benchmark's default CPU time: every benchmark is one thread, and on a shared machine
// wall time would also count the time other processes hold the core.
//
//   build/bin/bench_reduce --benchmark_repetitions=7 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "bench/common/gbench_args.h"
#include "core/reduce.h"
#include "hoop/core.h"

namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;
constexpr std::size_t kLargest = 64 * kMiB;

// Cache-line aligned, like the tensors and fusion buffers the kernels see in practice.
struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

Buffer make_buffer() { return Buffer(static_cast<std::byte*>(std::aligned_alloc(64, kLargest))); }

std::byte* dst_buffer() {
  static const Buffer buffer = make_buffer();
  return buffer.get();
}

std::byte* src_buffer() {
  static const Buffer buffer = make_buffer();
  return buffer.get();
}

// Writes every page before timing, so no page fault lands in the measurement. 0x3c in every byte
// is a normal, finite number in each float format (f16 1.06, bf16 and f32 0.0115, f64 1.6e-18),
// so no denormal or NaN slow path can distort a result.
void prepare(std::size_t bytes) {
  std::memset(dst_buffer(), 0x3c, bytes);
  std::memset(src_buffer(), 0x3c, bytes);
}

std::string size_label(std::size_t bytes) {
  return bytes >= kMiB ? std::to_string(bytes / kMiB) + "MiB"
                       : std::to_string(bytes / kKiB) + "KiB";
}

void bm_memcpy(benchmark::State& state, std::size_t bytes) {
  prepare(bytes);
  for (auto _ : state) {
    std::memcpy(dst_buffer(), src_buffer(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 *
                          static_cast<std::int64_t>(bytes));
}

void bm_reduce_into(benchmark::State& state, hoop::DataType dtype, hoop::ReduceOp op,
                    std::size_t bytes, hoop::ReduceIsa isa) {
  const hoop::ReduceIsa previous = hoop::reduce_isa();
  if (const hoop::Status s = hoop::set_reduce_isa(isa); !s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  prepare(bytes);
  const std::size_t count = bytes / hoop::dtype_size(dtype);
  for (auto _ : state) {
    const hoop::Status s = hoop::reduce_into(dst_buffer(), src_buffer(), count, dtype, op);
    if (!s.ok()) {
      state.SkipWithError(s.to_string().c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 3 *
                          static_cast<std::int64_t>(bytes));
  (void)hoop::set_reduce_isa(previous);
}

void register_reduce(hoop::DataType dtype, hoop::ReduceOp op, std::size_t bytes,
                     hoop::ReduceIsa isa) {
  const std::string name = "BM_ReduceInto/" + std::string(hoop::dtype_name(dtype)) + "_" +
                           std::string(hoop::op_name(op)) + "/" + size_label(bytes) + "/" +
                           std::string(hoop::reduce_isa_name(isa));
  benchmark::RegisterBenchmark(name.c_str(), bm_reduce_into, dtype, op, bytes, isa)
      ->Unit(benchmark::kMicrosecond);
}

void register_all() {
  using hoop::DataType;
  using hoop::ReduceIsa;
  using hoop::ReduceOp;
  const ReduceIsa best = hoop::reduce_isa();
  for (const std::size_t bytes : {64 * kKiB, kMiB, kLargest}) {
    benchmark::RegisterBenchmark(("BM_Memcpy/" + size_label(bytes)).c_str(), bm_memcpy, bytes)
        ->Unit(benchmark::kMicrosecond);
    register_reduce(DataType::kF32, ReduceOp::kSum, bytes, best);
  }
  for (const DataType dtype : {DataType::kF16, DataType::kBF16, DataType::kF64, DataType::kI32}) {
    register_reduce(dtype, ReduceOp::kSum, kLargest, best);
  }
  register_reduce(DataType::kF32, ReduceOp::kMax, kLargest, best);
  if (best != ReduceIsa::kGeneric) {
    // What the CPU-specific variant buys over the portable one.
    register_reduce(DataType::kF32, ReduceOp::kSum, kLargest, ReduceIsa::kGeneric);
    register_reduce(DataType::kF16, ReduceOp::kSum, kLargest, ReduceIsa::kGeneric);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto exit_status = hoop::bench::parse_gbench_args(
          &argc, argv, "bench_reduce",
          "Throughput of hoop's CPU reduction kernels against memcpy of the same size, in one run.\n  e.g. bench_reduce --benchmark_repetitions=7 --benchmark_report_aggregates_only=true\n")) {
    return *exit_status;
  }
  if (dst_buffer() == nullptr || src_buffer() == nullptr) {
    std::fprintf(stderr, "bench_reduce: cannot allocate 2 x %zu bytes\n", kLargest);
    return 1;
  }
  benchmark::AddCustomContext("hoop_reduce_isa",
                              std::string(hoop::reduce_isa_name(hoop::reduce_isa())));
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
