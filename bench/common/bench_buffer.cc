#include "bench/common/bench_buffer.h"

#include <fmt/format.h>

namespace hoop::bench {

Result<std::unique_ptr<BenchBuffer>> BenchBuffer::host_memory(std::size_t bytes) {
  Buffer host = allocate(bytes);
  if (!host) return internal_error(fmt::format("cannot allocate {} bytes of host memory", bytes));
  return std::unique_ptr<BenchBuffer>(new BenchBuffer(std::move(host)));
}

}  // namespace hoop::bench
